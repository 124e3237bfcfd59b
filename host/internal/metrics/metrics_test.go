package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/consul"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/host/internal/router"
	"github.com/vigilhq/vigil/host/internal/supervisor"
	"github.com/vigilhq/vigil/sdk"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestWorker(inflight int, registered bool) *Worker {
	return NewWorker("v1.2.3", WorkerSources{
		InFlight:   func() int { return inflight },
		Registered: func() bool { return registered },
	})
}

// A worker's life as the metrics show it: the gauges follow the
// lifecycle, and every counter child is there from the start, at 0.
func TestWorkerCollectors(t *testing.T) {
	t.Parallel()
	w := newTestWorker(3, true)
	w.Entered(supervisor.StateServing)
	w.Availability(sdk.Serving)
	w.Availability(sdk.NotReady)
	w.Entered(supervisor.StateNotReady)
	w.Withdrawn(supervisor.CauseNotReady)
	w.Reregistered(supervisor.CauseNotReady)
	w.Withdrawn("no such cause") // not counted: it would be an undocumented label
	w.Finished(endpoint.OutcomeOK, 5, 7)
	w.Finished(endpoint.OutcomeOK, 1, 2)
	w.Finished(endpoint.OutcomeRefused, 0, 0)
	w.Announcer().Failed(context.DeadlineExceeded)
	w.Announcer().Failed(fmt.Errorf("registering: %w: Permission denied", discovery.ErrPermissionDenied))
	w.Announcer().Reregistered()
	w.EngineStarted(2 * time.Second)
	w.Busy(true)
	w.Busy(false)
	w.Busy(true) // a second episode, still under way
	w.Recovered(supervisor.CauseLost)
	w.Recovered(supervisor.CauseLost)
	w.Recovered(supervisor.CauseHung)

	want := `
# HELP vigil_engine_busy 1 while the adapter reports the serving engine busy: its liveness checks time out while its connection answers HTTP/2 PINGs (--health-busy-timeout); else 0.
# TYPE vigil_engine_busy gauge
vigil_engine_busy 1
# HELP vigil_engine_busy_episodes_total Times the adapter reported the serving engine busy.
# TYPE vigil_engine_busy_episodes_total counter
vigil_engine_busy_episodes_total 2
# HELP vigil_engine_recoveries_total Times --on-loss=wait took vigil back to waiting for the engine after losing it, by cause (lost; hung: the adapter stopped answering; draining: the engine drained on purpose).
# TYPE vigil_engine_recoveries_total counter
vigil_engine_recoveries_total{cause="draining"} 0
vigil_engine_recoveries_total{cause="hung"} 1
vigil_engine_recoveries_total{cause="lost"} 2
# HELP vigil_engine_availability 1 for the engine's availability as the adapter last reported it (serving, not_ready, draining: on purpose, lost), 0 for the others; all 0 before its first report.
# TYPE vigil_engine_availability gauge
vigil_engine_availability{availability="draining"} 0
vigil_engine_availability{availability="lost"} 0
vigil_engine_availability{availability="not_ready"} 1
vigil_engine_availability{availability="serving"} 0
# HELP vigil_worker_requests_total Generate requests the worker endpoint answered, by outcome (ok, refused, overloaded, invalid, cancelled, cut, failed).
# TYPE vigil_worker_requests_total counter
vigil_worker_requests_total{outcome="cancelled"} 0
vigil_worker_requests_total{outcome="cut"} 0
vigil_worker_requests_total{outcome="failed"} 0
vigil_worker_requests_total{outcome="invalid"} 0
vigil_worker_requests_total{outcome="ok"} 2
vigil_worker_requests_total{outcome="overloaded"} 0
vigil_worker_requests_total{outcome="refused"} 1
# HELP vigil_worker_prompt_tokens_total Prompt tokens of the requests the worker forwarded, as the engine counted them.
# TYPE vigil_worker_prompt_tokens_total counter
vigil_worker_prompt_tokens_total 6
# HELP vigil_worker_completion_tokens_total Completion tokens the engine generated for the worker's requests.
# TYPE vigil_worker_completion_tokens_total counter
vigil_worker_completion_tokens_total 9
# HELP vigil_worker_withdrawals_total Times the worker, serving, was withdrawn from discovery, by cause (not_ready: the engine asleep or paused; lost; stop; failed; draining: the engine drains on purpose).
# TYPE vigil_worker_withdrawals_total counter
vigil_worker_withdrawals_total{cause="draining"} 0
vigil_worker_withdrawals_total{cause="failed"} 0
vigil_worker_withdrawals_total{cause="lost"} 0
vigil_worker_withdrawals_total{cause="not_ready"} 1
vigil_worker_withdrawals_total{cause="stop"} 0
# HELP vigil_worker_reregistrations_total Times the worker was registered again, by why it had left discovery (not_ready: the engine served again; registry_lost: the registry had lost it).
# TYPE vigil_worker_reregistrations_total counter
vigil_worker_reregistrations_total{cause="not_ready"} 1
vigil_worker_reregistrations_total{cause="registry_lost"} 1
# HELP vigil_discovery_errors_total Failed registry calls (register, renew, deregister), by kind (timeout, unreachable, permission_denied, not_registered, other); each is retried.
# TYPE vigil_discovery_errors_total counter
vigil_discovery_errors_total{kind="not_registered"} 0
vigil_discovery_errors_total{kind="other"} 0
vigil_discovery_errors_total{kind="permission_denied"} 1
vigil_discovery_errors_total{kind="timeout"} 1
vigil_discovery_errors_total{kind="unreachable"} 0
# HELP vigil_worker_requests_in_flight Requests the worker endpoint has admitted and not yet answered.
# TYPE vigil_worker_requests_in_flight gauge
vigil_worker_requests_in_flight 3
# HELP vigil_worker_registered 1 while the registry holds the worker's registration, as far as vigil knows; else 0.
# TYPE vigil_worker_registered gauge
vigil_worker_registered 1
`
	names := []string{"vigil_engine_busy", "vigil_engine_busy_episodes_total", "vigil_engine_recoveries_total", "vigil_engine_availability", "vigil_worker_requests_total", "vigil_worker_prompt_tokens_total",
		"vigil_worker_completion_tokens_total", "vigil_worker_withdrawals_total", "vigil_worker_reregistrations_total",
		"vigil_discovery_errors_total", "vigil_worker_requests_in_flight", "vigil_worker_registered"}
	if err := testutil.GatherAndCompare(w.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	states := gatherGauges(t, w.Registry(), "vigil_lifecycle_state", "state")
	if diff := cmp.Diff(map[string]float64{"launching": 0, "waiting": 0, "started": 0, "preparing": 0, "serving": 0,
		"not_ready": 1, "engine_draining": 0, "draining": 0, "stopped": 0}, states); diff != "" {
		t.Errorf("vigil_lifecycle_state (-want +got):\n%s", diff)
	}
	if n := histogramCount(t, w.Registry(), "vigil_engine_startup_wait_seconds"); n != 1 {
		t.Errorf("vigil_engine_startup_wait_seconds count = %d, want 1", n)
	}
}

// An engine that drains on purpose shows as such: its availability, the
// lifecycle state and the withdrawal's cause.
func TestWorkerEngineDraining(t *testing.T) {
	w := newTestWorker(0, false)
	w.Entered(supervisor.StateServing)
	w.Availability(sdk.Serving)
	w.Availability(sdk.Draining)
	w.Withdrawn(supervisor.CauseDraining)
	w.Entered(supervisor.StateEngineDraining)
	if got := gatherGauges(t, w.Registry(), "vigil_engine_availability", "availability"); got["draining"] != 1 || got["lost"] != 0 {
		t.Errorf("vigil_engine_availability = %v, want draining 1 and lost 0", got)
	}
	if got := gatherGauges(t, w.Registry(), "vigil_lifecycle_state", "state"); got["engine_draining"] != 1 || got["draining"] != 0 {
		t.Errorf("vigil_lifecycle_state = %v, want engine_draining 1", got)
	}
	want := `
# HELP vigil_worker_withdrawals_total Times the worker, serving, was withdrawn from discovery, by cause (not_ready: the engine asleep or paused; lost; stop; failed; draining: the engine drains on purpose).
# TYPE vigil_worker_withdrawals_total counter
vigil_worker_withdrawals_total{cause="draining"} 1
vigil_worker_withdrawals_total{cause="failed"} 0
vigil_worker_withdrawals_total{cause="lost"} 0
vigil_worker_withdrawals_total{cause="not_ready"} 0
vigil_worker_withdrawals_total{cause="stop"} 0
`
	if err := testutil.GatherAndCompare(w.Registry(), strings.NewReader(want), "vigil_worker_withdrawals_total"); err != nil {
		t.Error(err)
	}
}

// Counting a request allocates nothing: its children are resolved up front.
func TestFinishedDoesNotAllocate(t *testing.T) {
	w := newTestWorker(0, false)
	if n := testing.AllocsPerRun(100, func() { w.Finished(endpoint.OutcomeOK, 3, 4) }); n != 0 {
		t.Errorf("Finished allocates %v times per call, want 0", n)
	}
}

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	info := gatherGauges(t, NewRouter("v9").Registry(), "vigil_build_info", "version")
	if info["v9"] != 1 || len(info) != 1 {
		t.Errorf("vigil_build_info by version = %v, want v9: 1", info)
	}
}

// Errors of the Consul backend over a real consul/api client, each
// classified as its kind.
func TestErrorKind(t *testing.T) {
	t.Parallel()
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Permission denied: token with AccessorID '' lacks permission 'service:write' on \"llm\"", http.StatusForbidden)
	}))
	defer forbidden.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	register := func(addr string, timeout time.Duration) error {
		c, err := api.NewClient(&api.Config{Address: addr})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		reg := consul.New(c, addr, consul.Options{TTL: 10 * time.Second, DeregisterAfter: time.Minute})
		return reg.Register(ctx, discovery.Registration{Service: "llm", WorkerID: "w1"})
	}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"403":            {register(strings.TrimPrefix(forbidden.URL, "http://"), 5*time.Second), KindPermissionDenied},
		"timeout":        {register(strings.TrimPrefix(slow.URL, "http://"), 50*time.Millisecond), KindTimeout},
		"refused":        {register(closedAddr, 5*time.Second), KindUnreachable},
		"not registered": {fmt.Errorf("heartbeat: %w", discovery.ErrNotRegistered), KindNotRegistered},
		"other":          {errors.New("disk full"), KindOther},
	} {
		if tc.err == nil {
			t.Errorf("%s: the call did not fail", name)
			continue
		}
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("%s: ErrorKind(%v) = %s, want %s", name, tc.err, got, tc.want)
		}
	}
}

func TestRouterCollectors(t *testing.T) {
	t.Parallel()
	r := NewRouter("dev")
	if got := gatherGauges(t, r.Registry(), "vigil_route_workers", "model"); len(got) != 0 {
		t.Errorf("vigil_route_workers before the pool = %v, want none", got)
	}
	workers := []discovery.Registration{{WorkerID: "a", Model: "m1"}, {WorkerID: "b", Model: "m1"}, {WorkerID: "c", Model: "m2"}}
	r.Workers(func() []discovery.Registration { return workers })
	r.Request("m1", "a", codes.OK)
	r.Request("m1", "a", codes.OK)
	r.Request("m1", "b", codes.Unavailable)
	r.Request("", "", codes.NotFound)
	r.Retry("m1")
	r.Migration("m1", router.MigrationResumed)
	r.Migration("m1", router.MigrationResumed)
	r.Migration("m1", router.MigrationFailed)
	r.Migration("m1", "other")
	r.FirstToken("m1", 30*time.Millisecond)

	want := `
# HELP vigil_route_requests_total Generate requests (gRPC and HTTP completions) the router answered, by model, worker id ("" when none was tried) and gRPC status code.
# TYPE vigil_route_requests_total counter
vigil_route_requests_total{model="",status="NOT_FOUND",worker=""} 1
vigil_route_requests_total{model="m1",status="OK",worker="a"} 2
vigil_route_requests_total{model="m1",status="UNAVAILABLE",worker="b"} 1
# HELP vigil_route_retries_total Requests tried on another worker after one refused them before their first message, by model.
# TYPE vigil_route_retries_total counter
vigil_route_retries_total{model="m1"} 1
# HELP vigil_route_stream_migrations_total Streams moved to another worker because theirs could not finish them, by model and result: resumed (another worker went on) or failed (none did; the client got the failure).
# TYPE vigil_route_stream_migrations_total counter
vigil_route_stream_migrations_total{model="m1",result="failed"} 1
vigil_route_stream_migrations_total{model="m1",result="resumed"} 2
# HELP vigil_route_workers Workers the router knows from discovery and can route to, by served model name; 0 for a model known with none (one served it within 10 minutes, or --model names it).
# TYPE vigil_route_workers gauge
vigil_route_workers{model="m1"} 2
vigil_route_workers{model="m2"} 1
`
	if err := testutil.GatherAndCompare(r.Registry(), strings.NewReader(want),
		"vigil_route_requests_total", "vigil_route_retries_total", "vigil_route_stream_migrations_total", "vigil_route_workers"); err != nil {
		t.Error(err)
	}
	if n := histogramCount(t, r.Registry(), "vigil_route_time_to_first_token_seconds"); n != 1 {
		t.Errorf("time to first token count = %d, want 1", n)
	}
	// A model whose workers all left is gone from the gauge at once,
	// unless the pool knows it: then it reads 0.
	workers = workers[:2]
	if got := gatherGauges(t, r.Registry(), "vigil_route_workers", "model"); !cmp.Equal(got, map[string]float64{"m1": 2}) {
		t.Errorf("vigil_route_workers after m2's worker left = %v, want m1: 2", got)
	}
	r.Models(func() []string { return []string{"m1", "m2", "pinned"} })
	if got := gatherGauges(t, r.Registry(), "vigil_route_workers", "model"); !cmp.Equal(got, map[string]float64{"m1": 2, "m2": 0, "pinned": 0}) {
		t.Errorf("vigil_route_workers with m2 and pinned known = %v, want m1: 2, m2: 0, pinned: 0", got)
	}
}

// A worker's series are dropped WorkerSeriesMemory after it left
// discovery, or after its last request ended if later; those of current
// workers, and of requests no worker took, stay. Refusals are counted by
// reason, each from 0.
func TestRouterDropsDepartedWorkers(t *testing.T) {
	t.Parallel()
	r := NewRouter("dev")
	now := time.Unix(1_000_000, 0)
	r.now = func() time.Time { return now }
	workers := []discovery.Registration{{WorkerID: "a", Model: "m"}, {WorkerID: "b", Model: "m"}}
	r.Workers(func() []discovery.Registration { return workers })
	r.Request("m", "a", codes.OK)
	r.Request("m", "b", codes.OK)
	r.Request("", "", codes.NotFound)
	series := func() map[string]float64 {
		t.Helper()
		return gatherCounters(t, r.Registry(), "vigil_route_requests_total", "worker")
	}
	workers = workers[:1] // b leaves discovery
	series()
	now = now.Add(WorkerSeriesMemory - time.Second)
	if got := series(); len(got) != 3 {
		t.Fatalf("series just within the memory = %v, want a, b and \"\"", got)
	}
	now = now.Add(2 * time.Second)
	if got := series(); !cmp.Equal(got, map[string]float64{"a": 1, "": 1}) {
		t.Errorf("series after b was gone for WorkerSeriesMemory = %v, want a and \"\" only", got)
	}
	// A request of b's ending later brings its series back for as long.
	r.Request("m", "b", codes.Canceled)
	now = now.Add(WorkerSeriesMemory - time.Second)
	if got := series(); got["b"] != 1 {
		t.Errorf("b's late request = %v, want its series back", got)
	}
	now = now.Add(2 * time.Second)
	if got := series(); len(got) != 2 {
		t.Errorf("series a memory after b's last request = %v, want a and \"\" only", got)
	}
	r.Refused(router.RefusedNoWorker)
	r.Refused("made-up")
	want := map[string]float64{"unauthorized": 0, "invalid": 0, "too_large": 0, "unknown_model": 0, "no_worker": 1}
	if got := gatherCounters(t, r.Registry(), "vigil_route_refused_total", "reason"); !cmp.Equal(got, want) {
		t.Errorf("vigil_route_refused_total = %v, want %v", got, want)
	}
}

// /metrics is served on its own listener; /debug/pprof/ only with
// withPprof.
func TestServe(t *testing.T) {
	t.Parallel()
	for _, withPprof := range []bool{false, true} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := Serve(lis, newTestWorker(0, false).Registry(), withPprof, hclog.NewNullLogger())
		body, code := get(t, "http://"+s.Addr().String()+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, "vigil_build_info{") || !strings.Contains(body, "go_goroutines ") ||
			!strings.Contains(body, "process_") && runtimeHasProcfs() {
			t.Errorf("GET /metrics: %d, want 200 with vigil_build_info, go_ and process_ metrics:\n%.400s", code, body)
		}
		wantPprof := http.StatusNotFound
		if withPprof {
			wantPprof = http.StatusOK
		}
		if _, code := get(t, "http://"+s.Addr().String()+"/debug/pprof/"); code != wantPprof {
			t.Errorf("pprof %v: GET /debug/pprof/ = %d, want %d", withPprof, code, wantPprof)
		}
		s.Close()
	}
}

func runtimeHasProcfs() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// gatherGauges returns the values of gauge name by its label.
func gatherGauges(t *testing.T, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range family(t, g, name).GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// gatherCounters returns the values of counter name by its label, summed.
func gatherCounters(t *testing.T, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range family(t, g, name).GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range family(t, g, name).GetMetric() {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

func family(t *testing.T, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return &dto.MetricFamily{}
}

// registered is every vigil_ metric a registry describes, by name, with
// its type as gathered (once every child exists).
func registered(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]string{}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil && strings.HasPrefix(m[1], "vigil_") {
			out[m[1]] = ""
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, ok := out[mf.GetName()]; ok {
			out[mf.GetName()] = strings.ToLower(mf.GetType().String())
		}
	}
	return out
}

// TestDocsListTheMetrics holds the metrics table of docs/metrics.md and
// the registries together: each metric vigil run or vigil route registers
// has a row, with its type and labels, and each row a metric.
func TestDocsListTheMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(vigil_[a-z_]+)` \\| (\\w+) \\| ([^|]*) \\| [^|]+ \\|$")
	doc := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = [2]string{m[2], strings.TrimSpace(m[3])}
	}
	if len(doc) == 0 {
		t.Fatal("docs/metrics.md's metrics table has no rows")
	}

	w := newTestWorker(0, false)
	r := NewRouter("dev")
	// Every child once, so that each family is gathered with its type.
	r.Workers(func() []discovery.Registration { return []discovery.Registration{{Model: "m"}} })
	r.Request("m", "w", codes.OK)
	r.FirstToken("m", time.Millisecond)
	r.Retry("m")
	r.Migration("m", router.MigrationResumed)
	w.EngineStarted(time.Second)
	labels := labelNames(t, w.Registry(), r.Registry())

	code := map[string]string{}
	for _, reg := range []*prometheus.Registry{w.Registry(), r.Registry()} {
		for name, typ := range registered(t, reg) {
			code[name] = typ
		}
	}
	for name, typ := range code {
		row, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md's table has no row for %s", name)
		case row[0] != typ:
			t.Errorf("docs/metrics.md says %s is a %s, the code registers a %s", name, row[0], typ)
		case row[1] != labels[name]:
			t.Errorf("docs/metrics.md gives %s the labels %q, the code %q", name, row[1], labels[name])
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/metrics.md's table lists %s, which neither vigil run nor vigil route registers", name)
		}
	}
}

// labelNames is each vigil_ metric's label names, as docs/metrics.md writes
// them: `a`, `b` (histograms' le left out).
func labelNames(t *testing.T, regs ...*prometheus.Registry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "vigil_") || len(mf.GetMetric()) == 0 {
				continue
			}
			var names []string
			for _, l := range mf.GetMetric()[0].GetLabel() {
				names = append(names, "`"+l.GetName()+"`")
			}
			slices.Sort(names)
			out[mf.GetName()] = strings.Join(names, ", ")
		}
	}
	return out
}

// vigil_worker_registration_refused follows the announcer's state at
// scrape time: 1 while the registry refuses the worker, 0 before and after.
func TestRegistrationRefusedGauge(t *testing.T) {
	t.Parallel()
	var refused atomic.Bool
	w := NewWorker("v1.2.3", WorkerSources{InFlight: func() int { return 0 }, Registered: func() bool { return false },
		Refused: refused.Load})
	for _, want := range []bool{false, true, false} {
		refused.Store(want)
		v := 0
		if want {
			v = 1
		}
		exp := fmt.Sprintf(`
# HELP vigil_worker_registration_refused 1 while the registry refuses the worker's registration for want of a permission (a Consul token without service:write), which retrying alone will not mend; else 0.
# TYPE vigil_worker_registration_refused gauge
vigil_worker_registration_refused %d
`, v)
		if err := testutil.GatherAndCompare(w.Registry(), strings.NewReader(exp), "vigil_worker_registration_refused"); err != nil {
			t.Errorf("refused %v: %v", want, err)
		}
	}
}

// A worker deciding which prompts it takes shows as preparing.
func TestWorkerPreparing(t *testing.T) {
	w := newTestWorker(0, false)
	w.Entered(supervisor.StateStarted)
	w.Entered(supervisor.StatePreparing)
	if got := gatherGauges(t, w.Registry(), "vigil_lifecycle_state", "state"); got["preparing"] != 1 || got["started"] != 0 {
		t.Errorf("vigil_lifecycle_state = %v, want preparing 1", got)
	}
}
