package enginemock

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const (
	serving    = healthpb.HealthCheckResponse_SERVING
	notServing = healthpb.HealthCheckResponse_NOT_SERVING
	unknownSvc = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
)

// newEngine builds an engine that is stopped when the test ends.
func newEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e := New(cfg)
	t.Cleanup(e.Stop)
	return e
}

// do sends one request to the control surface in process and returns the
// status code and the decoded body.
func do(t *testing.T, e *Engine, method, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type = %q, want application/json", method, path, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: decoding %q: %v", method, path, rec.Body, err)
	}
	return rec.Code, m
}

// must sends a POST that must answer 200.
func must(t *testing.T, e *Engine, path, body string) {
	t.Helper()
	if code, got := do(t, e, http.MethodPost, path, body); code != http.StatusOK {
		t.Fatalf("POST %s %s = %d %v, want 200", path, body, code, got)
	}
}

// published records what Publish hears.
type published struct {
	mu      sync.Mutex
	changes []Change
}

func (p *published) publish(c Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changes = append(p.changes, c)
}

// take returns the changes heard since the last take.
func (p *published) take() []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.changes
	p.changes = nil
	return c
}

// readiness is a rule with a liveness signal "live" and a readiness signal
// "ready" that also fails while asleep or paused.
func readiness(sig string, c Condition) Status {
	switch {
	case !c.Ready:
		return notServing
	case sig == "ready" && (c.Sleeping || c.Paused):
		return notServing
	}
	return serving
}

// TestPublish follows one engine through its life and checks what its
// health view hears at each step.
func TestPublish(t *testing.T) {
	t.Parallel()
	var p published
	e := newEngine(t, Config{InstanceID: "i", Signals: []string{"live", "ready"}, Health: readiness, Publish: p.publish})
	ready := Condition{Ready: true}
	health := func(live, ready Status) map[string]Status { return map[string]Status{"live": live, "ready": ready} }

	// New publishes the initial state, then readiness at once: no delay.
	want := []Change{
		{Condition: Condition{}, Health: health(notServing, notServing), Changed: []string{"live", "ready"}, InstanceID: "i"},
		{Condition: ready, Health: health(serving, serving), Changed: []string{"live", "ready"}, InstanceID: "i"},
	}
	if diff := cmp.Diff(want, p.take()); diff != "" {
		t.Fatalf("after New (-want +got):\n%s", diff)
	}

	// Pausing fails readiness only; pausing again changes nothing.
	e.SetPaused(true)
	e.SetPaused(true)
	paused := Condition{Ready: true, Paused: true}
	want = []Change{{Condition: paused, Health: health(serving, notServing), Changed: []string{"ready"}, InstanceID: "i"}}
	if diff := cmp.Diff(want, p.take()); diff != "" {
		t.Fatalf("after SetPaused (-want +got):\n%s", diff)
	}

	// Sleeping as well changes the condition but no status: still heard.
	e.SetSleeping(true)
	both := Condition{Ready: true, Paused: true, Sleeping: true}
	want = []Change{{Condition: both, Health: health(serving, notServing), InstanceID: "i"}}
	if diff := cmp.Diff(want, p.take(), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("after SetSleeping (-want +got):\n%s", diff)
	}

	// A pin adds a signal the engine lacks; stop takes every signal down.
	must(t, e, "/health", `{"service": "extra", "status": "SERVING"}`)
	e.Stop()
	stopped := both
	stopped.Stopped = true
	want = []Change{
		{Condition: both, Health: map[string]Status{"live": serving, "ready": notServing, "extra": serving}, Changed: []string{"extra"}, InstanceID: "i"},
		{Condition: stopped, Health: map[string]Status{"live": notServing, "ready": notServing, "extra": notServing}, Changed: []string{"live", "extra"}, InstanceID: "i"},
	}
	if diff := cmp.Diff(want, p.take()); diff != "" {
		t.Fatalf("after pin and Stop (-want +got):\n%s", diff)
	}
	if got := e.Condition(); got != stopped {
		t.Errorf("Condition() = %+v, want %+v", got, stopped)
	}
}

func TestStartupDelay(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	begin := time.Now()
	e := newEngine(t, Config{StartupDelay: delay, Signals: []string{""}})

	if got := e.Status(""); got != notServing {
		t.Errorf("Status before the delay = %v, want NOT_SERVING", got)
	}
	if err := e.Available(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "starting") {
		t.Errorf("Available() before the delay = %v, want UNAVAILABLE, still starting", err)
	}
	select {
	case <-e.Ready():
		t.Fatal("Ready() closed before the delay")
	default:
	}

	<-e.Ready()
	if since := time.Since(begin); since < delay {
		t.Errorf("ready after %v, want at least %v", since, delay)
	}
	if got := e.Status(""); got != serving {
		t.Errorf("Status after the delay = %v, want SERVING", got)
	}
	if err := e.Available(); err != nil {
		t.Errorf("Available() after the delay = %v, want nil", err)
	}
	if got, min := e.State().LastHealthChangeUnixNano, begin.Add(delay).UnixNano(); got < min {
		t.Errorf("last_health_change_unix_nano = %d, want at least %d", got, min)
	}
	if got := e.Status("nope"); got != unknownSvc {
		t.Errorf("Status(nope) = %v, want SERVICE_UNKNOWN", got)
	}
}

func TestStopBeforeReady(t *testing.T) {
	t.Parallel()
	e := New(Config{StartupDelay: time.Hour, Signals: []string{""}})
	e.Stop()
	e.Stop() // idempotent
	select {
	case <-e.Ready():
		t.Error("Ready() closed by Stop")
	default:
	}
	if err := e.Available(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Available() after Stop = %v, want UNAVAILABLE, shutting down", err)
	}
}

func TestInstanceIDDefault(t *testing.T) {
	t.Parallel()
	a, b := newEngine(t, Config{}), newEngine(t, Config{})
	ia, ib := a.State().InstanceID, b.State().InstanceID
	if len(ia) != 16 || ia == ib {
		t.Errorf("default instance ids %q and %q, want two different 16-character ids", ia, ib)
	}
	if got := a.Config().Model; got != "mock-model" {
		t.Errorf("default model %q, want mock-model", got)
	}
}

func TestStateCounters(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{Model: "m", InstanceID: "i", Signals: []string{"live", "ready"}, Health: readiness})
	for _, id := range []string{"a", "b", "a"} {
		if _, err := collect(t.Context(), e, Request{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.Abort("a", "c")
	e.Abort("a")
	must(t, e, "/sleep", "")

	want := State{
		Model:         "m",
		InstanceID:    "i",
		Health:        map[string]string{"live": "SERVING", "ready": "NOT_SERVING"},
		Sleeping:      true,
		Requests:      map[string]int{"a": 2, "b": 1},
		Aborts:        map[string]int{"a": 2, "c": 1},
		RequestsTotal: 3,
		AbortsTotal:   3,
	}
	if diff := cmp.Diff(want, e.State(), cmpopts.IgnoreFields(State{}, "LastHealthChangeUnixNano")); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}

	// The JSON names are the contract benchmarks and the e2e suite read.
	_, raw := do(t, e, http.MethodGet, "/state", "")
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wantKeys := []string{"aborts", "aborts_total", "check_latency", "health", "in_flight", "instance_id", "last_health_change_unix_nano", "last_min_p", "last_prompt", "model", "paused", "requests", "requests_total", "sleeping"}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("/state keys (-want +got):\n%s", diff)
	}
}

// TestAborted: the channel closes on the first abort of its id, whether
// asked for before or after it, and never for another id.
func TestAborted(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	before := e.Aborted("a")
	other := e.Aborted("b")
	select {
	case <-before:
		t.Fatal(`Aborted("a") closed before any abort, want open`)
	default:
	}
	e.Abort("a")
	e.Abort("a")
	for name, ch := range map[string]<-chan struct{}{"asked before": before, "asked after": e.Aborted("a")} {
		select {
		case <-ch:
		default:
			t.Errorf(`Aborted("a") %s the abort: open, want closed`, name)
		}
	}
	select {
	case <-other:
		t.Error(`Aborted("b") closed by an abort of "a", want open`)
	default:
	}
}
