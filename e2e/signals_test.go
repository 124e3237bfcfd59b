package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// TestSIGHUPUnderNohup: the suite run under nohup (SIGHUP ignored, which
// its children would inherit) still starts its processes with SIGHUP's
// default, so that TestSIGHUP's vigils heed it: the test binary, started
// from a parent that ignores SIGHUP, starts a child that a SIGHUP ends.
func TestSIGHUPUnderNohup(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", `trap '' HUP; exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), envHUPProbe+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "child: signal: hangup" {
		t.Errorf("the test binary's child under nohup: %q, want it ended by SIGHUP (%q)", got, "child: signal: hangup")
	}
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
			} else {
				t.Logf("withdrawn %s after the engine slept", d.Round(time.Millisecond))
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
			} else {
				t.Logf("vigil exited %s after %s", d.Round(time.Millisecond), end.name)
			}
			if c.catalogHas(t, svc) {
				t.Errorf("worker still in Consul after vigil exited on %s", end.name)
			}
		})
	}
}

// crashLoopRounds is how many times TestAdapterCrashLoop kills the adapter.
const crashLoopRounds = 5

// adapterLossBound bounds the time from the adapter's death to the
// worker's withdrawal.
const adapterLossBound = time.Second

// TestAdapterCrashLoop: the engine adapter process is killed (SIGKILL)
// five times in a row, vigil restarted after each (as its supervisor
// would) against the same engine, which keeps running, with requests in
// flight through the worker each time: each time the worker is withdrawn
// from Consul within adapterLossBound of the kill, the requests in flight
// end (UNAVAILABLE, never a hang) and the engine stops generating them,
// vigil logs the adapter's death as the loss and exits 1, and no process
// of vigil's, the adapter above all, is left behind. Run per
// engine, for each has its own adapter; an engine that takes no requests
// through vigil runs without the load.
func TestAdapterCrashLoop(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)})
		for round := 1; round <= crashLoopRounds; round++ {
			// A TTL far longer than the test: only vigil's own
			// deregistration can take the worker out of the passing list.
			v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
			c.passing(t, svc, 30*time.Second, count(1))
			adapters := children(v.pid())
			if len(adapters) != 1 {
				t.Fatalf("round %d: vigil has %d child processes, want its adapter alone", round, len(adapters))
			}
			inflight := startLoad(t, e, v, 4)

			killed := time.Now()
			if err := syscall.Kill(adapters[0], syscall.SIGKILL); err != nil {
				t.Fatalf("round %d: killing the adapter: %v", round, err)
			}
			_, gone := c.passing(t, svc, 10*time.Second, count(0))
			if d := gone.Sub(killed); d > adapterLossBound {
				t.Errorf("round %d: withdrawn %s after the adapter was killed, want within %s", round, d, adapterLossBound)
			} else {
				t.Logf("round %d: withdrawn %s after the adapter was killed", round, d.Round(time.Millisecond))
			}
			if code := v.wait(exitBound); code != 1 {
				t.Fatalf("round %d: vigil exit code = %d after its adapter was killed, want 1", round, code)
			}
			t.Logf("round %d: vigil exited %s after the adapter was killed", round, time.Since(killed).Round(time.Millisecond))
			if l := v.findLine("engine lost"); !strings.Contains(l, "[ERROR]") || !strings.Contains(l, "adapter process exited") {
				t.Errorf("round %d: loss line %q, want an error saying the adapter process exited", round, l)
			}
			if l := v.findLine("adapter shutdown failed"); l != "" {
				t.Errorf("round %d: vigil warned of the dead adapter's shutdown: %s", round, l)
			}
			for i, r := range inflight.wait(t, exitBound) {
				if status.Code(r.err) != codes.Unavailable {
					t.Errorf("round %d: request in flight %d ended with %v after %d tokens, want Unavailable", round, i, r.err, len(r.tokens))
				}
			}
			if left := harness.GroupMembers(v.pid()); len(left) > 0 {
				t.Errorf("round %d: processes %v of vigil's left running after it exited", round, left)
			}
			if alive(adapters[0]) {
				t.Errorf("round %d: the killed adapter %d is still running", round, adapters[0])
			}
			if c.catalogHas(t, svc) {
				t.Errorf("round %d: worker still in Consul after vigil exited", round)
			}
			// The engine ends the dead adapter's requests, its connection
			// gone, instead of generating on for no one.
			for m.state(t).InFlight > 0 {
				if time.Since(killed) > adapterLossBound+time.Second {
					t.Fatalf("round %d: the engine still generates %d requests %s after the adapter was killed", round, m.state(t).InFlight, time.Since(killed))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if m.exited() {
			t.Errorf("the engine exited (%d): the adapter's crashes must not touch it", m.exitCode())
		}
	})
}

// load is requests in flight through a worker.
type load struct {
	results []completion
	done    chan struct{}
}

// startLoad starts n long requests (1000 tokens at the mock's pace) through
// v's worker endpoint and returns once each has had its first token; none
// when e takes no requests through vigil.
func startLoad(t *testing.T, e *engine, v *vigil, n int) *load {
	t.Helper()
	l := &load{done: make(chan struct{})}
	if e.lifecycleOnly {
		close(l.done)
		return l
	}
	client := workerClient(t, v.Listen)
	l.results = make([]completion, n)
	first := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.results[i] = generate(context.Background(), client, tokenPrompt(fmt.Sprintf("load-%d", i), 1000, 1), func(got int) {
				if got == 1 {
					first <- struct{}{}
				}
			})
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	for range n {
		select {
		case <-first:
		case <-l.done:
			t.Fatalf("a request ended before its first token: %+v", l.results)
		// Generous: the suite's start (many workers, tokenizers loading in
		// race builds) can hold a first token for seconds on 2 cores.
		case <-time.After(30 * time.Second):
			t.Fatal("the requests had no first token within 30s")
		}
	}
	return l
}

// wait waits for every request to end and returns them.
func (l *load) wait(t *testing.T, timeout time.Duration) []completion {
	t.Helper()
	select {
	case <-l.done:
		return l.results
	case <-time.After(timeout):
		t.Fatalf("requests in flight still open %s after vigil exited", timeout)
		return nil
	}
}
