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

// startRequests starts n requests (ids prefix-0 ... prefix-n-1) through
// the worker; started gets a value as each has its first token (or ended
// without one), done closes when every stream has ended, and results then
// holds how each ended.
func startRequests(t *testing.T, v *vigil, prefix string, n int) (results []completion, started, done <-chan struct{}) {
	t.Helper()
	c := workerClient(t, v.Listen)
	results = make([]completion, n)
	first := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			once := sync.OnceFunc(func() { first <- struct{}{} })
			results[i] = generate(context.Background(), c, tokenPrompt(fmt.Sprintf("%s-%d", prefix, i), 100, 1, 2), func(int) { once() })
			once() // a stream that ended before its first token must not hang a wait for it
		})
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return results, first, ch
}

// holdRequests holds every new generation at the engine after its first
// token and starts n requests (startRequests); it returns once each has
// its first token.
func holdRequests(t *testing.T, m *mock, v *vigil, prefix string, n int) (results []completion, done <-chan struct{}) {
	t.Helper()
	m.post(t, "/hold", map[string]int{"at_token": 1})
	results, started, done := startRequests(t, v, prefix, n)
	for range n {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("held requests did not get their first token within 30s")
		}
	}
	return results, done
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

// loggedAt is the time of one of vigil's text log lines, by its clock (the
// driver's).
func loggedAt(t *testing.T, line string) time.Time {
	t.Helper()
	stamp, _, _ := strings.Cut(line, " ")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
	if err != nil {
		t.Fatalf("log line %q: no timestamp: %v", line, err)
	}
	return at
}

// TestBoundedShutdown: the withdrawal, the drain, the abort of the
// requests the grace period cut, the adapter's shutdown and vigil's exit
// take at most the grace period + the shutdown delay + 2s from the moment
// vigil begins to drain (the SIGTERM, the engine loss it logs), however
// the adapter or the engine hangs: an adapter that never returns from one
// of its calls (cmd/vigil-adapter-test's TEST_ADAPTER_HANG), or one
// frozen whole (SIGSTOP); an engine that holds its requests, or one
// frozen whole. vigil leaves no adapter process behind, and exits 124
// (shutdown budget) when a step of the unwinding had to be abandoned at
// its bound (the engine's abort or the adapter's shutdown unanswered),
// else with the code of why it stopped (0 for SIGTERM, 1 for the loss).
func TestBoundedShutdown(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const (
		grace    = time.Second
		shutdown = 500 * time.Millisecond // --shutdown-delay
		tail     = 2 * time.Second
		// margin is the measurement's: the log line's and the exit's
		// timestamps against a busy machine's scheduling.
		margin = 500 * time.Millisecond
	)
	e := firstEngine()
	type stop struct {
		way  string // "SIGTERM" or "engine lost"
		code int
	}
	term := func(code int) stop { return stop{"SIGTERM", code} }
	lost := func(code int) stop { return stop{"engine lost", code} }
	for _, tc := range []struct {
		name string
		hang string // TEST_ADAPTER_HANG
		// reached is logged once vigil is where the case stops it;
		// "worker registered" for a serving worker.
		reached string
		// held requests are held at the engine, or (held false) hung in
		// the adapter, when the stop comes.
		requests int
		held     bool
		freeze   string // "adapter" or "engine" (SIGSTOP) before the stop
		stops    []stop
	}{
		{name: "adapter hangs in Info", hang: "Info", reached: "hanging in Info", stops: []stop{term(0)}},
		{name: "adapter hangs in Start", hang: "Start", reached: "hanging in Start", stops: []stop{term(0)}},
		{name: "adapter hangs in WatchAvailability", hang: "WatchAvailability", reached: "hanging in WatchAvailability", stops: []stop{term(0)}},
		{name: "adapter hangs in Generate", hang: "Generate", reached: "worker registered", requests: 2, stops: []stop{term(0), lost(1)}},
		{name: "adapter hangs in Abort", hang: "Abort", reached: "worker registered", requests: 2, held: true, stops: []stop{term(124), lost(124)}},
		{name: "adapter hangs in Shutdown", hang: "Shutdown", reached: "worker registered", stops: []stop{term(124), lost(124)}},
		{name: "adapter frozen", freeze: "adapter", reached: "worker registered", requests: 2, held: true, stops: []stop{term(124)}},
		{name: "engine holds requests", reached: "worker registered", requests: 2, held: true, stops: []stop{term(0), lost(1)}},
		{name: "engine frozen", freeze: "engine", reached: "worker registered", requests: 2, held: true, stops: []stop{term(124), lost(124)}},
	} {
		for _, st := range tc.stops {
			t.Run(tc.name+"/"+st.way, func(t *testing.T) {
				t.Parallel()
				m := startMock(t, e, harness.MockOpts{TokenDelay: delay(0)})
				extra := []string{"--grace-period", grace.String(), "--shutdown-delay", shutdown.String(),
					"--health-interval", "200ms", "--health-timeout", "500ms",
					// A race-enabled adapter would sleep 1s at exit.
					"--plugin-env", "GORACE"}
				var env []string
				if tc.hang != "" {
					// Named after the engine, the test adapter reports it.
					bin, _ := install(t, t.TempDir(), e.Name, testAdapterBin)
					extra = append(extra, "--engine-plugin", bin, "--plugin-env", "TEST_ADAPTER_HANG")
					env = []string{"TEST_ADAPTER_HANG=" + tc.hang}
				}
				v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: t.TempDir(),
					service: "llm", extra: extra, env: env})
				v.waitLine(tc.reached, 30*time.Second)
				adapters := children(v.pid())
				if len(adapters) != 1 {
					t.Fatalf("vigil has %d child processes, want its adapter alone", len(adapters))
				}
				var done <-chan struct{}
				if tc.requests > 0 {
					if tc.held {
						_, done = holdRequests(t, m, v, "r", tc.requests)
					} else {
						_, _, done = startRequests(t, v, "r", tc.requests)
						v.waitLine("hanging in "+tc.hang, 30*time.Second)
					}
				}
				switch tc.freeze {
				case "adapter":
					if err := syscall.Kill(adapters[0], syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
				case "engine":
					m.signal(syscall.SIGSTOP) // the cleanup's SIGKILL ends a stopped process too
				}

				var began time.Time
				bound := grace + tail
				if st.way == "SIGTERM" {
					bound += shutdown
					began = time.Now()
					v.term(t)
				} else {
					if tc.freeze != "engine" {
						e.unhealthy.lose(t, m)
					}
					began = loggedAt(t, v.waitLine("engine lost", 30*time.Second))
				}
				exitAt, code, err := v.Vigil.Wait(bound + margin + exitBound)
				if err != nil {
					t.Fatal(err)
				}
				took := exitAt.Sub(began)
				t.Logf("vigil exited %d %s after it began to drain (bound %s)", code, took.Round(time.Millisecond), bound)
				if code != st.code {
					t.Errorf("vigil exit code = %d, want %d", code, st.code)
				}
				if took > bound+margin {
					t.Errorf("vigil exited %s after it began to drain, want within the grace period + the shutdown delay + %s = %s (+%s to measure)",
						took, tail, bound, margin)
				}
				for _, pid := range adapters {
					if alive(pid) {
						t.Errorf("adapter process %d still running after vigil exited", pid)
					}
				}
				if done != nil {
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						t.Error("requests in flight did not end within 10s of vigil's exit")
					}
				}
			})
		}
	}
}
