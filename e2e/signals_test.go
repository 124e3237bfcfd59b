package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"golang.org/x/sys/unix"
)

// TestSIGHUP: SIGHUP stops vigil as SIGTERM does, never at once with 129.
//   - registered: a registered worker's vigil logs the signal, withdraws
//     the worker from Consul and exits 0;
//   - terminal hangup: SIGHUP sent to vigil's whole process group (as a
//     terminal that closes sends it), its adapter included, with a
//     request in flight: the request finishes whole through the adapter,
//     and vigil exits 0;
//   - nohup: vigil started with SIGHUP ignored keeps it ignored, saying
//     so: it keeps serving, and the next SIGTERM is the stop;
//   - route: vigil route logs it, stops and exits 0.
func TestSIGHUP(t *testing.T) {
	skipShort(t)
	e := firstEngine()
	t.Run("registered", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		// A TTL far longer than the test: only vigil's own deregistration
		// can empty the catalog.
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
		c.passing(t, svc, 30*time.Second, count(1))
		v.signal(syscall.SIGHUP)
		if l := v.waitLine("signal received; draining", exitBound); !strings.Contains(l, "signal=hangup") {
			t.Errorf("draining line %q does not name the signal (hangup)", l)
		}
		if code := v.wait(exitBound); code != 0 {
			t.Fatalf("vigil exit code = %d after SIGHUP, want 0", code)
		}
		if c.catalogHas(t, svc) {
			t.Error("worker still in Consul after SIGHUP")
		}
	})
	t.Run("terminal hangup", func(t *testing.T) {
		t.Parallel()
		_, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)}, "--grace-period", "30s")
		client := workerClient(t, v.Listen)
		first := make(chan struct{})
		res := make(chan completion, 1)
		go func() {
			// 100 tokens at 20ms: about 2s.
			res <- generate(context.Background(), client, tokenPrompt("inflight", 100, 1), func(n int) {
				if n == 1 {
					close(first)
				}
			})
		}()
		<-first
		if err := v.proc.SignalGroup(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := v.wait(exitBound); code != 0 {
			t.Errorf("vigil exit code = %d after SIGHUP to its group, want 0", code)
		}
		if r := <-res; r.err != nil || len(r.tokens) != 100 || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
			t.Errorf("request in flight: %d tokens, final %v, err %v; want all 100: the adapter must outlive the hangup until vigil has drained",
				len(r.tokens), r.final, r.err)
		}
	})
	t.Run("nohup", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		// As nohup does: exec vigil with SIGHUP ignored.
		nohup := filepath.Join(t.TempDir(), "nohup-vigil")
		if err := os.WriteFile(nohup, []byte("#!/bin/sh\ntrap '' HUP\nexec "+vigilBin+" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		hv, err := harness.StartVigil(starter{t}, nohup, harness.VigilOpts{Engine: e.Name, EngineAddr: m.GRPC, Consul: c.Consul, Service: svc,
			Extra: []string{"--check-ttl", "5m"}})
		if err != nil {
			t.Fatal(err)
		}
		v := &vigil{proc: &proc{Proc: hv.Proc, t: t}, Vigil: hv}
		v.waitLine("signal ignored", 30*time.Second)
		c.passing(t, svc, 30*time.Second, count(1))
		// An ignored signal is dropped when sent, so the SIGTERM after it
		// is the first stop signal vigil sees.
		v.signal(syscall.SIGHUP)
		v.term(t)
		if l := v.waitLine("signal received; draining", exitBound); !strings.Contains(l, "signal=terminated") {
			t.Errorf("vigil under nohup drained for %q, want for SIGTERM alone", l)
		}
		if code := v.wait(exitBound); code != 0 {
			t.Fatalf("vigil exit code = %d, want 0", code)
		}
		if l := v.findLine("second signal"); l != "" {
			t.Errorf("vigil under nohup heeded SIGHUP: %s", l)
		}
		if !strings.Contains(v.findLine("signal ignored"), "signal=hangup") {
			t.Errorf("vigil did not say that it keeps SIGHUP ignored: %q", v.findLine("signal ignored"))
		}
	})
	t.Run("route", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		r := startRouter(t, c, uniqueService(t), 0)
		r.signal(syscall.SIGHUP)
		if l := r.waitLine("stopping", exitBound); !strings.Contains(l, "signal=hangup") {
			t.Errorf("router's stopping line %q does not name the signal (hangup)", l)
		}
		if code := r.wait(exitBound); code != 0 {
			t.Fatalf("vigil route exit code = %d after SIGHUP, want 0", code)
		}
	})
}

// logPipe is a pipe for a process's stderr, its log, whose reader the test
// controls: it reads and keeps the lines until stop, after which nothing
// reads it; then break closes the read end (a log reader that died, so
// that writes fail with EPIPE) or stall fills it (a reader that stopped
// reading, so that writes block).
type logPipe struct {
	r, w *os.File

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every line
	stopped chan struct{} // closed when the reading goroutine has returned
}

// newLogPipe returns a pipe to start a process with (its w end) and
// starts reading it. The test's copies of both ends are closed at the end
// of the test.
func newLogPipe(t *testing.T) *logPipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &logPipe{r: r, w: w, changed: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.r.Close()
		p.w.Close()
		<-p.stopped
		if t.Failed() {
			t.Logf("--- log read from the pipe:\n%s", strings.Join(p.got(), "\n"))
		}
	})
	return p
}

// started is called once the process has been started with w: the test's
// copy of the write end is closed, so that the process holds the only one.
func (p *logPipe) started(t *testing.T) {
	t.Helper()
	if err := p.w.Close(); err != nil {
		t.Fatal(err)
	}
}

func (p *logPipe) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// waitLine waits until a line read holds substr.
func (p *logPipe) waitLine(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for seen := 0; ; {
		p.mu.Lock()
		lines, changed := p.lines, p.changed
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if strings.Contains(lines[seen], substr) {
				return
			}
		}
		select {
		case <-changed:
		case <-p.stopped:
			t.Fatalf("the log pipe ended before a line held %q", substr)
		case <-deadline:
			t.Fatalf("no line of the log pipe held %q within %s", substr, timeout)
		}
	}
}

// stop stops reading: the reading goroutine returns at its read deadline.
func (p *logPipe) stop(t *testing.T) {
	t.Helper()
	if err := p.r.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	<-p.stopped
}

// breakPipe stops reading and closes the read end: the process's next
// write to the pipe fails with EPIPE, and raises SIGPIPE.
func (p *logPipe) breakPipe(t *testing.T) {
	t.Helper()
	p.stop(t)
	if err := p.r.Close(); err != nil {
		t.Fatal(err)
	}
}

// stall stops reading and fills the pipe until the process's writes to it
// block: through a write end of the test's own, non-blocking, opened
// anew through /proc (the test closed its copy once the process started),
// so that the process's stays blocking.
func (p *logPipe) stall(t *testing.T, pid int) {
	t.Helper()
	p.stop(t)
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/2", pid), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// Pages, then single bytes, until not even one fits: then the
	// process's next write, of any length, blocks.
	for _, chunk := range [][]byte{bytes.Repeat([]byte("filler\n"), 512), []byte("\n")} {
		for {
			_, err := unix.Write(fd, chunk)
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				t.Fatalf("filling the log pipe: %v", err)
			}
		}
	}
}

// TestSIGPIPE: with vigil's log piped to a reader that dies, the next log
// line does not kill vigil (Go's runtime ends a program whose write to
// stderr fails with EPIPE, exit 141, unless it handles SIGPIPE): an engine
// that sleeps is withdrawn within notReadyBound and registered again when
// it wakes, and vigil ends as the exit-code table says, withdrawn: 0 after
// SIGTERM, 1 after an engine loss.
func TestSIGPIPE(t *testing.T) {
	skipShort(t)
	brokenLogSink(t, func(t *testing.T, p *logPipe, _ *vigil) { p.breakPipe(t) })
}

// TestStalledLogSink: with vigil's log piped to a reader that stops
// reading, so that the pipe is full and every write to it blocks, the
// lifecycle goes on as with TestSIGPIPE's dead reader: log calls never
// wait on the output (the entries queue, bounded, and the excess is
// dropped and counted), and vigil, exiting, gives up on the output
// within half a second.
func TestStalledLogSink(t *testing.T) {
	skipShort(t)
	brokenLogSink(t, func(t *testing.T, p *logPipe, v *vigil) { p.stall(t, v.pid()) })
}

// brokenLogSink runs a registered worker whose log pipe breaks (by
// breakSink) through a sleep and a wake of its engine, then ends it by a
// stop or an engine loss.
func brokenLogSink(t *testing.T, breakSink func(t *testing.T, p *logPipe, v *vigil)) {
	e := firstEngine()
	for _, end := range []struct {
		name string
		code int
		do   func(t *testing.T, m *mock, v *vigil)
	}{
		{"SIGTERM", 0, func(t *testing.T, _ *mock, v *vigil) { v.term(t) }},
		{"engine lost", 1, func(t *testing.T, m *mock, _ *vigil) { m.signal(syscall.SIGKILL) }},
	} {
		t.Run(end.name, func(t *testing.T) {
			t.Parallel()
			c := consulFor(t)
			svc := uniqueService(t)
			m := startMock(t, e, harness.MockOpts{})
			p := newLogPipe(t)
			// A TTL far longer than the test: only vigil's own
			// deregistration can take the worker out of the passing list.
			hv, err := harness.StartVigil(starter{t}, vigilBin, harness.VigilOpts{Engine: e.Name, EngineAddr: m.GRPC, Consul: c.Consul,
				Service: svc, Extra: []string{"--check-ttl", "5m", "--grace-period", "5s"}, Stderr: p.w})
			if err != nil {
				t.Fatal(err)
			}
			p.started(t)
			v := &vigil{proc: &proc{Proc: hv.Proc, t: t}, Vigil: hv}
			c.passing(t, svc, 30*time.Second, count(1))
			p.waitLine(t, "worker registered", 10*time.Second)

			breakSink(t, p, v)
			sent := time.Now()
			m.post(t, "/sleep", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, gone, err := c.Passing(ctx, svc, count(0))
			cancel()
			if err != nil {
				t.Fatalf("worker not withdrawn within 10s of the engine's sleep (vigil exited: %v, code %d): %v", v.exited(), v.exitCode(), err)
			}
			if d := gone.Sub(changedSince(t, m, sent)); d > notReadyBound {
				t.Errorf("withdrawn %s after the engine slept, want within %s", d, notReadyBound)
			}
			if v.exited() {
				t.Fatalf("vigil exited with %d when the engine slept, its log output broken", v.exitCode())
			}
			sent = time.Now()
			m.post(t, "/wake", nil)
			_, back := c.passing(t, svc, 10*time.Second, count(1))
			if d := back.Sub(changedSince(t, m, sent)); d > notReadyBound {
				t.Errorf("registered again %s after the engine woke, want within %s", d, notReadyBound)
			}

			ended := time.Now()
			end.do(t, m, v)
			if code := v.wait(exitBound); code != end.code {
				t.Fatalf("vigil exit code = %d after %s, its log output broken; want %d", code, end.name, end.code)
			}
			// The grace period, and the half second a stalled output may
			// hold the exit.
			if d := time.Since(ended); d > 5*time.Second+time.Second {
				t.Errorf("vigil exited %s after %s, want within the 5s grace period and 1s", d, end.name)
			}
			if c.catalogHas(t, svc) {
				t.Errorf("worker still in Consul after vigil exited on %s", end.name)
			}
		})
	}
}
