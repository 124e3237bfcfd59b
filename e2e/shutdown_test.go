package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stopWay ends a serving worker: a stop signal, or the engine's loss.
type stopWay struct {
	name string
	code int // vigil's exit code after it
	stop func(t *testing.T, e *engine, m *mock, v *vigil)
}

// stopWays are a SIGTERM (exit 0) and the engine reporting itself failed,
// its process up and still generating (exit 1).
var stopWays = []stopWay{
	{"SIGTERM", 0, func(t *testing.T, _ *engine, _ *mock, v *vigil) { v.term(t) }},
	{"engine lost", 1, func(t *testing.T, e *engine, m *mock, _ *vigil) { e.unhealthy.lose(t, m) }},
}

// holdRequests holds every new generation at the engine after its first
// token, starts n requests (ids prefix-0 ... prefix-n-1) through the
// worker and returns once each has its first token; done closes when
// every stream has ended, and results holds how each ended.
func holdRequests(t *testing.T, m *mock, v *vigil, prefix string, n int) (results []completion, done <-chan struct{}) {
	t.Helper()
	m.post(t, "/hold", map[string]int{"at_token": 1})
	c := workerClient(t, v.Listen)
	results = make([]completion, n)
	started := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := sync.OnceFunc(func() { started <- struct{}{} })
			results[i] = generate(context.Background(), c, tokenPrompt(fmt.Sprintf("%s-%d", prefix, i), 100, 1, 2), func(int) { first() })
			first() // a stream that failed before its first token must not hang the wait below
		}()
	}
	for range n {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("held requests did not get their first token within 30s")
		}
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return results, ch
}

// abortedIDs are the engine-side ids of the client's request id the engine
// was asked to abort (the worker sends the client's id with a suffix).
func abortedIDs(aborts map[string]int, id string) []string {
	var out []string
	for a := range aborts {
		if strings.HasPrefix(a, id+"-") {
			out = append(out, a)
		}
	}
	return out
}

// TestGraceCutAborts: requests still in flight when the grace period ends
// are cut (the client gets UNAVAILABLE, grace period ended) and aborted at
// the engine by their engine-side ids before vigil shuts its adapter down
// and exits, after a SIGTERM (exit 0) and after an engine loss with the
// engine still generating (exit 1). The engine holds every request after
// its first token, so only an abort (or its client leaving) ends it.
func TestGraceCutAborts(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		for _, way := range stopWays {
			t.Run(way.name, func(t *testing.T) {
				t.Parallel()
				const n = 4
				m, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(0)}, "--grace-period", "500ms")
				results, done := holdRequests(t, m, v, "cut", n)
				way.stop(t, e, m, v)
				if code := v.wait(exitBound); code != way.code {
					t.Fatalf("vigil exit code = %d, want %d", code, way.code)
				}
				<-done
				aborts := m.state(t).Aborts
				for i, r := range results {
					id := fmt.Sprintf("cut-%d", i)
					if got := abortedIDs(aborts, id); len(got) != 1 {
						t.Errorf("request %s: engine aborted %v by the time vigil exited, want its one engine-side id", id, got)
					}
					if status.Code(r.err) != codes.Unavailable || !strings.Contains(status.Convert(r.err).Message(), "grace period ended") {
						t.Errorf("request %s ended with %v, want UNAVAILABLE saying the grace period ended", id, r.err)
					}
				}
				if t.Failed() {
					t.Logf("engine aborts: %v", aborts)
				}
			})
		}
	})
}

var _ = syscall.SIGSTOP
