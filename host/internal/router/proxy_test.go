package router

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

func TestRoundRobinSpreadsOverWorkers(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	r := startRouter(t, []*fakeWorker{a, b})

	for i := range 4 {
		g := r.generate(t.Context(), "m", "hi")
		if g.err != nil || g.text != "hello world" || g.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_STOP {
			t.Fatalf("request %d: got text %q, final %v, err %v; want \"hello world\", STOP, nil", i, g.text, g.final, g.err)
		}
	}
	if a.requests.Load() != 2 || b.requests.Load() != 2 {
		t.Errorf("requests per worker: %s, want a=2 b=2", counts(a, b))
	}
}

func TestEmptyModelGoesToAnyWorker(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m1"), startWorker(t, "b", "m2")
	r := startRouter(t, []*fakeWorker{a, b})

	for range 2 {
		if g := r.generate(t.Context(), "", "hi"); g.err != nil {
			t.Fatalf("got %v, want success", g.err)
		}
	}
	if a.requests.Load() != 1 || b.requests.Load() != 1 {
		t.Errorf("requests per worker: %s, want a=1 b=1", counts(a, b))
	}
}

func TestRequestsGoOnlyToWorkersOfTheModel(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m1"), startWorker(t, "b", "m2")
	r := startRouter(t, []*fakeWorker{a, b})

	for range 3 {
		if g := r.generate(t.Context(), "m2", "hi"); g.err != nil {
			t.Fatalf("got %v, want success", g.err)
		}
	}
	if a.requests.Load() != 0 || b.requests.Load() != 3 {
		t.Errorf("requests per worker: %s, want a=0 b=3", counts(a, b))
	}
}

func TestRetryBeforeFirstChunk(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
			a.set(func(w *fakeWorker) { w.refuse = code })
			r := startRouter(t, []*fakeWorker{a, b})

			// Whichever worker the round-robin picks first, every request
			// ends on b: a refuses before its first message.
			for i := range 3 {
				g := r.generate(t.Context(), "m", "hi")
				if g.err != nil || g.text != "hello world" {
					t.Fatalf("request %d: got text %q, err %v; want \"hello world\" from the other worker", i, g.text, g.err)
				}
			}
			if b.requests.Load() != 3 {
				t.Errorf("requests per worker: %s, want b=3", counts(a, b))
			}
		})
	}
}

func TestNoRetryOnOtherErrors(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	a.set(func(w *fakeWorker) { w.refuse = codes.InvalidArgument })
	b.set(func(w *fakeWorker) { w.refuse = codes.InvalidArgument })
	r := startRouter(t, []*fakeWorker{a, b})

	g := r.generate(t.Context(), "m", "hi")
	if status.Code(g.err) != codes.InvalidArgument {
		t.Errorf("got %v, want INVALID_ARGUMENT", g.err)
	}
	if n := a.requests.Load() + b.requests.Load(); n != 1 {
		t.Errorf("requests: %s, want 1 in all", counts(a, b))
	}
}

func TestNoRetryAfterFirstChunk(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	a.set(func(w *fakeWorker) { w.breakAfterChunk = true })
	b.set(func(w *fakeWorker) { w.breakAfterChunk = true })
	r := startRouter(t, []*fakeWorker{a, b})

	g := r.generate(t.Context(), "m", "hi")
	if status.Code(g.err) != codes.Unavailable || g.text != "hello" {
		t.Errorf("got text %q, err %v; want \"hello\" and UNAVAILABLE", g.text, g.err)
	}
	if f := g.final; f.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR || f.GetDescription() != "engine lost" {
		t.Errorf("final = %v, want ERROR \"engine lost\" relayed as sent", f)
	}
	if n := a.requests.Load() + b.requests.Load(); n != 1 {
		t.Errorf("requests: %s, want 1 in all", counts(a, b))
	}
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	ws := []*fakeWorker{startWorker(t, "a", "m"), startWorker(t, "b", "m"), startWorker(t, "c", "m")}
	for _, w := range ws {
		w.set(func(w *fakeWorker) { w.refuse = codes.Unavailable })
	}
	for _, tc := range []struct {
		name    string
		retries int
		want    int64
	}{
		{"no retries", 0, 1},
		{"one retry", 1, 2},
		{"more retries than workers", 5, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRouter(t, ws, withRetries(tc.retries))
			before := ws[0].requests.Load() + ws[1].requests.Load() + ws[2].requests.Load()
			g := r.generate(t.Context(), "m", "hi")
			if status.Code(g.err) != codes.Unavailable {
				t.Errorf("got %v, want the workers' UNAVAILABLE", g.err)
			}
			after := ws[0].requests.Load() + ws[1].requests.Load() + ws[2].requests.Load()
			if after-before != tc.want {
				t.Errorf("attempts = %d, want %d (each worker at most once)", after-before, tc.want)
			}
		})
	}
}

func TestDroppedWorkerGetsNoRequests(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
	r := startRouter(t, []*fakeWorker{a, b})

	r.pool.Update(endpoints(a))
	for range 4 {
		if g := r.generate(t.Context(), "m", "hi"); g.err != nil {
			t.Fatalf("got %v, want success", g.err)
		}
	}
	if a.requests.Load() != 4 || b.requests.Load() != 0 {
		t.Errorf("requests per worker: %s, want a=4 b=0", counts(a, b))
	}

	// And back: a worker that returns to discovery gets requests again.
	r.pool.Update(endpoints(a, b))
	for range 2 {
		if g := r.generate(t.Context(), "m", "hi"); g.err != nil {
			t.Fatalf("got %v, want success", g.err)
		}
	}
	if b.requests.Load() != 1 {
		t.Errorf("requests per worker: %s, want b=1 after it returned", counts(a, b))
	}
}

func TestNoWorkerForModel(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	for _, tc := range []struct {
		name    string
		workers []*fakeWorker
		model   string
		want    codes.Code
	}{
		{"unknown model", []*fakeWorker{a}, "other", codes.NotFound},
		{"no workers", nil, "m", codes.Unavailable},
		{"no workers, any model", nil, "", codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRouter(t, tc.workers)
			g := r.generate(t.Context(), tc.model, "hi")
			if status.Code(g.err) != tc.want {
				t.Errorf("got %v, want %v", g.err, tc.want)
			}
		})
	}
	if a.requests.Load() != 0 {
		t.Errorf("worker a got %d requests, want 0", a.requests.Load())
	}
}

func TestClientCancellationReachesWorker(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	a.set(func(w *fakeWorker) { w.hold = true })
	r := startRouter(t, []*fakeWorker{a})

	ctx, cancel := context.WithCancel(t.Context())
	stream, err := r.client.Generate(ctx, &workerv1.GenerateRequest{Model: "m", Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.holding
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("client got %v, want CANCELED", err)
	}
	<-a.cancelled // the worker's call ended with the client's
}

// The gRPC health service and HTTP GET /health say the same, from the
// pool: NOT_SERVING and 503 with no worker, SERVING and 200 with one, and
// the Watch stream follows each change.
func TestHealthAgrees(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	r := startRouter(t, nil)
	hc := healthpb.NewHealthClient(r.conn)
	// A change that never comes fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	watches := map[string]grpc.ServerStreamingClient[healthpb.HealthCheckResponse]{}
	for _, svc := range []string{"", workerv1.Worker_ServiceDesc.ServiceName} {
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		watches[svc] = w
	}
	want := func(step string, serving bool) {
		t.Helper()
		st, code := healthpb.HealthCheckResponse_NOT_SERVING, http.StatusServiceUnavailable
		if serving {
			st, code = healthpb.HealthCheckResponse_SERVING, http.StatusOK
		}
		for svc, w := range watches {
			if m, err := w.Recv(); err != nil || m.GetStatus() != st {
				t.Errorf("%s: Watch of %q: %v, %v; want %v", step, svc, m.GetStatus(), err, st)
			}
			if resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc}); err != nil || resp.GetStatus() != st {
				t.Errorf("%s: Check of %q: %v, %v; want %v", step, svc, resp.GetStatus(), err, st)
			}
		}
		if got, _, body := r.do(t, "GET", "/health", ""); got != code {
			t.Errorf("%s: GET /health: %d %s, want %d", step, got, body, code)
		}
	}
	want("no workers", false)
	r.pool.Update(endpoints(a))
	want("a worker", true)
	r.pool.Update(nil)
	want("worker withdrawn", false)
	r.pool.Update(endpoints(a))
	want("worker back", true)
	r.pool.Close()
	want("pool closed", false)
}

// TestReflection: the router's gRPC listener serves gRPC server
// reflection, so that grpcurl lists and calls its services without the
// protos.
func TestReflection(t *testing.T) {
	r := startRouter(t, nil)
	stream, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	for _, want := range []string{workerv1.Worker_ServiceDesc.ServiceName, healthpb.Health_ServiceDesc.ServiceName} {
		if !slices.Contains(got, want) {
			t.Errorf("reflection lists %v, want %s among them", got, want)
		}
	}
}

// Through the router with the default balance, a worker that fails every
// request at once (UNAVAILABLE before any message, as an engine that
// fails instantly), or answers with no token, gets no more than its share
// of 300 requests among three workers; a failing one's requests are
// retried elsewhere, so every client succeeds.
func TestFastFailingWorkerGetsNoMoreThanItsShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		breaks func(w *fakeWorker)
	}{
		{"unavailable", func(w *fakeWorker) { w.fail = status.Error(codes.Unavailable, "engine request failed: boom") }},
		{"empty answer", func(w *fakeWorker) { w.empty = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b, c := startWorker(t, "a", "m"), startWorker(t, "b", "m"), startWorker(t, "c", "m")
			// The healthy ones take 2 ms to their first token, as an
			// engine; the failing one answers at once.
			for _, w := range []*fakeWorker{b, c} {
				w.set(func(w *fakeWorker) { w.ttft = 2 * time.Millisecond })
			}
			a.set(tc.breaks)
			r := startRouterAt(t, PoolConfig{}, endpoints(a, b, c))
			const requests = 300
			for i := range requests {
				g := r.generate(t.Context(), "m", "hi")
				if tc.name == "unavailable" && (g.err != nil || g.text != "hello world") {
					t.Fatalf("request %d: %q, %v; want hello world, retried past the failing worker", i, g.text, g.err)
				}
			}
			if n := a.requests.Load(); n > requests/3 {
				t.Errorf("the failing worker got %d of %d requests (%s), want at most its share, %d", n, requests, counts(a, b, c), requests/3)
			}
		})
	}
}

// What counts against a worker (Lease.Failed) and what does not: the
// client's own doing and statuses that blame the request are not the
// worker's fault.
func TestWorkerFault(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ok := answer{tokens: true}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		got  answer
		want bool
	}{
		{"answered", context.Background(), nil, ok, false},
		{"no token", context.Background(), nil, answer{}, true},
		{"error final", context.Background(), nil, answer{tokens: true, errFinal: true}, true},
		{"unavailable", context.Background(), status.Error(codes.Unavailable, "engine lost"), answer{}, true},
		{"mid-stream loss", context.Background(), status.Error(codes.Unavailable, "engine lost"), ok, true},
		{"internal", context.Background(), status.Error(codes.Internal, "x"), answer{}, true},
		{"full", context.Background(), status.Error(codes.ResourceExhausted, "worker has 8 requests in flight"), answer{}, true},
		{"too large", context.Background(), status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5 vs. 4)"), answer{}, false},
		{"bad request", context.Background(), status.Error(codes.InvalidArgument, "prompt: must not be empty"), answer{}, false},
		{"client cancelled", cancelled, status.Error(codes.Canceled, "context canceled"), answer{}, false},
		{"client cancelled, worker unavailable", cancelled, status.Error(codes.Unavailable, "x"), answer{}, false},
		{"client went away", context.Background(), errSend{io.ErrClosedPipe}, ok, false},
	} {
		if got := workerFault(tc.ctx, tc.err, tc.got); got != tc.want {
			t.Errorf("%s: workerFault = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// lines are the lines logged so far that hold substr.
func (s *syncBuffer) lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// A worker that died without withdrawing leaves its entry in discovery;
// its address is held now by a worker with another id serving another
// model (kubernetes #109414). That worker refuses the request meant for
// the old id (WORKER_MISMATCH), the router retries on the other worker of
// the model, and sends the stale entry nothing more while discovery lists
// it unchanged, logging it once at WARN with both ids; a change of the
// entry lifts the quarantine. The new worker's own entry is not touched.
func TestReusedAddressIsQuarantined(t *testing.T) {
	t.Parallel()
	a, x := startWorker(t, "a", "m"), startWorker(t, "x", "other")
	stale := discovery.Registration{WorkerID: "old", Address: x.ep.Address, Port: x.ep.Port, Model: "m", Engine: "fake", InstanceID: "old-1"}
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs})
	eps := []discovery.Registration{a.ep, stale, x.ep}
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin, Logger: log}, eps)
	ask := func(n int) {
		t.Helper()
		for i := range n {
			if g := r.generate(t.Context(), "m", "hi"); g.err != nil || g.text != "hello world" {
				t.Fatalf("request %d: %q, %v; want hello world from a", i, g.text, g.err)
			}
		}
	}
	const warning = "answers as another worker"
	ask(10)
	r.pool.Update(eps) // discovery's next answer, unchanged
	ask(10)
	if n := x.requests.Load(); n != 1 {
		t.Errorf("the reused address got %d requests for the stale entry, want 1 (%s)", n, counts(a, x))
	}
	if got := logs.lines(warning); len(got) != 1 || !strings.Contains(got[0], `worker_id=old`) || !strings.Contains(got[0], "answering_worker_id=x") {
		t.Errorf("warnings = %q, want one naming worker_id=old and answering_worker_id=x", got)
	}
	// Discovery changes the entry: it is tried again (and refused again).
	changed := stale
	changed.InstanceID = "old-2"
	r.pool.Update([]discovery.Registration{a.ep, changed, x.ep})
	ask(4)
	if n := x.requests.Load(); n != 2 {
		t.Errorf("after discovery changed the stale entry: %d requests at its address, want 2", n)
	}
	if got := logs.lines(warning); len(got) != 2 {
		t.Errorf("%d warnings after the changed entry was refused too, want 2", len(got))
	}
	if g := r.generate(t.Context(), "other", "hi"); g.err != nil {
		t.Errorf("a request for x's own model: %v", g.err)
	}
}
