package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
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
