package router

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"google.golang.org/grpc/codes"
)

// recorder is an Observer that keeps what it is told, as lines.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	workers func() []discovery.Registration
	models  func() []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) Workers(f func() []discovery.Registration) { r.workers = f }
func (r *recorder) Request(model, worker string, code codes.Code) {
	r.add("request model=%q worker=%q %s", model, worker, code)
}
func (r *recorder) FirstToken(model string, d time.Duration) {
	if d <= 0 {
		r.add("first token model=%q: non-positive %s", model, d)
	}
	r.add("first token model=%q", model)
}
func (r *recorder) Retry(model string)           { r.add("retry model=%q", model) }
func (r *recorder) Models(known func() []string) { r.models = known }
func (r *recorder) Refused(reason string)        { r.add("refused %s", reason) }

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// The Observer is told of each request with the model and worker that
// served it, of each retry and first token; a model nobody serves or
// served is labelled "", never the client's text.
func TestObserverSeesRequests(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	a.set(func(w *fakeWorker) { w.refuse = codes.Unavailable })
	rec := &recorder{}
	r := startRouter(t, []*fakeWorker{a, b}, func(p *ProxyConfig, _ *HTTPConfig) { p.Observer = rec })

	if g := r.generate(t.Context(), "m", "hi"); g.err != nil {
		t.Fatal(g.err)
	}
	if g := r.generate(t.Context(), "made-up-by-a-client", "hi"); g.err == nil {
		t.Fatal("a request for an unknown model succeeded")
	}
	// Round-robin decides whether a was tried first; drop its retry line.
	got := slices.DeleteFunc(rec.get(), func(l string) bool { return l == `retry model="m"` })
	want := []string{
		`first token model="m"`,
		`request model="m" worker="b" OK`,
		`request model="" worker="" NotFound`,
		"refused unknown_model",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	// Twice more: a is first for one of them, which is then retried.
	for range 2 {
		if g := r.generate(t.Context(), "m", "hi"); g.err != nil {
			t.Fatal(g.err)
		}
	}
	if !slices.Contains(rec.get(), `retry model="m"`) {
		t.Errorf("no retry observed though worker a refused: %v", rec.get())
	}
	if rec.workers == nil || len(rec.workers()) != 2 {
		t.Errorf("Workers not given the pool's two workers")
	}
}

// Requests refused before any worker is tried are counted with their
// reason; the pool's known models (a pinned one with no worker included)
// are given for the gauge.
func TestObserverSeesRefusals(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	observe := func(p *ProxyConfig, _ *HTTPConfig) { p.Observer = rec }
	eps := endpoints(startWorker(t, "a", "m"))
	r := startRouterAt(t, PoolConfig{Models: []string{"away"}}, eps, observe, withMaxBody(200))
	for _, tc := range []struct{ method, body string }{
		{"POST", "{"},
		{"POST", `{"model":"m","prompt":"` + strings.Repeat("p", 300) + `"}`},
		{"GET", ""},
		{"POST", `{"model":"nope","prompt":"p"}`},
		{"POST", `{"model":"away","prompt":"p"}`},
	} {
		r.do(t, tc.method, endpointCompletions, tc.body)
	}
	if got := rec.models(); !cmp.Equal(got, []string{"away", "m"}) {
		t.Errorf("known models = %v, want [away m]", got)
	}
	keyed := startRouterAt(t, PoolConfig{}, eps, observe, withAPIKey("k"))
	keyed.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"p"}`)
	var got []string
	for _, l := range rec.get() {
		if strings.HasPrefix(l, "refused ") {
			got = append(got, l)
		}
	}
	want := []string{"refused invalid", "refused too_large", "refused invalid", "refused unknown_model", "refused no_worker", "refused unauthorized"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
}
