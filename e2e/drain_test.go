package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// drainingWorker starts e's mock with tokenDelay and a vigil with the
// engine's drain on (--drain-timeout 1m, --stall-timeout stall, a grace
// period far shorter than the generations), on a file registry; it returns
// once the worker is registered, with the record's path.
func drainingWorker(t *testing.T, e *engine, tokenDelay, stall time.Duration) (*mock, *vigil, string) {
	t.Helper()
	dir := t.TempDir()
	m := startMock(t, e, harness.MockOpts{TokenDelay: delay(tokenDelay)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm",
		extra: []string{"--grace-period", "500ms", "--drain-timeout", "1m", "--stall-timeout", stall.String()}})
	path := filepath.Join(dir, "llm", v.WorkerID+".json")
	waitFile(t, path, true, 30*time.Second)
	return m, v, path
}

// TestEngineDrains: an engine that drains on purpose (vLLM in its shutdown
// grace period, SGLang's runtime stopping) reports NOT_SERVING and keeps
// streaming what it has. vigil withdraws the worker at once and admits
// nothing new, but a long generation in flight, far longer than the grace
// period, completes: every token, finish reason LENGTH; vigil exits 1
// after it. A stream that stalls (held at the engine) is cut after
// --stall-timeout instead, and aborted at the engine.
func TestEngineDrains(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		if !e.drains {
			t.Skip("the engine does not drain on purpose: its NOT_SERVING is a loss")
		}
		t.Run("stream completes", func(t *testing.T) {
			t.Parallel()
			testDrainCompletes(t, e)
		})
		t.Run("stalled stream cut", func(t *testing.T) {
			t.Parallel()
			testDrainStalled(t, e)
		})
	})
}

func testDrainCompletes(t *testing.T, e *engine) {
	const tokens = 60 // 3s at 50ms a token: six grace periods
	m, v, path := drainingWorker(t, e, 50*time.Millisecond, 2*time.Second)
	c := workerClient(t, v.Listen)
	first := make(chan struct{})
	res := make(chan completion, 1)
	go func() {
		var once bool
		res <- generate(context.Background(), c, tokenPrompt("long", tokens, 1, 2), func(int) {
			if !once {
				once = true
				close(first)
			}
		})
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the long generation had no first token within 30s")
	}
	m.post(t, "/drain", nil)
	_, withdrawn := waitFile(t, path, false, 5*time.Second)
	if r := generate(context.Background(), c, tokenPrompt("late", 1, 1), nil); status.Code(r.err) != codes.Unavailable {
		t.Errorf("a request during the drain ended with %v, want UNAVAILABLE", r.err)
	}
	var r completion
	select {
	case r = <-res:
	case <-time.After(30 * time.Second):
		t.Fatal("the long generation did not end within 30s of the drain")
	}
	ended := time.Now()
	if r.err != nil || len(r.tokens) != tokens || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("the generation in flight: %d tokens, final %v, error %v; want all %d, LENGTH, no error", len(r.tokens), r.final, r.err, tokens)
	}
	if code := v.wait(exitBound); code != 1 {
		t.Errorf("vigil exit code = %d, want 1", code)
	}
	if !withdrawn.Before(ended) {
		t.Errorf("withdrawn at %s, after the stream ended at %s: want at once", withdrawn, ended)
	}
	if line := v.findLine("engine draining on purpose"); !strings.Contains(line, "[WARN]") {
		t.Errorf("drain line %q, want it logged at warn", line)
	}
}

func testDrainStalled(t *testing.T, e *engine) {
	const stall = time.Second
	m, v, path := drainingWorker(t, e, 0, stall)
	results, done := holdRequests(t, m, v, "stall", 1)
	drained := time.Now()
	m.post(t, "/drain", nil)
	waitFile(t, path, false, 5*time.Second)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not cut within 30s")
	}
	if d := time.Since(drained); d < stall {
		t.Errorf("the stalled stream ended %s after the drain, before --stall-timeout %s", d, stall)
	}
	if r := results[0]; status.Code(r.err) != codes.Unavailable || !strings.Contains(status.Convert(r.err).Message(), "stall timeout") {
		t.Errorf("the stalled stream ended with %v, want UNAVAILABLE naming the stall timeout", r.err)
	}
	if code := v.wait(exitBound); code != 1 {
		t.Errorf("vigil exit code = %d, want 1", code)
	}
	if got := abortedIDs(m.state(t).Aborts, "stall-0"); len(got) != 1 {
		t.Errorf("engine aborted %v, want the stalled request's engine-side id", got)
	}
}
