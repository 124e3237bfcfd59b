package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// scrape reads a /metrics page into its samples, keyed as the text format
// writes them: name{label="value",...}, labels in name order.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// awaitMetric scrapes until series has value want (the metrics have no
// event to await), and fails the test after timeout with what was seen.
func awaitMetric(t *testing.T, addr, series string, want float64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, ok := scrape(t, addr)[series]
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (present %v), want %v within %s", series, got, ok, want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsAcrossSleepAndWake: a worker's /metrics, scraped across its
// engine's sleep and wake, shows the requests it served, the withdrawal
// and the re-registration; the router's /metrics shows the requests it
// routed by model, worker and status, and the workers it knows by model.
func TestMetricsAcrossSleepAndWake(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	metricsAddr := addr(freePort(t))
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--metrics-listen", metricsAddr}})
	c.passing(t, svc, 30*time.Second, count(1))
	awaitMetric(t, metricsAddr, "vigil_worker_registered", 1, 10*time.Second)
	before := scrape(t, metricsAddr)
	for series, want := range map[string]float64{
		`vigil_engine_availability{availability="serving"}`: 1,
		`vigil_lifecycle_state{state="serving"}`:            1,
		`vigil_worker_requests_total{outcome="ok"}`:         0,
		`vigil_worker_withdrawals_total{cause="not_ready"}`: 0,
	} {
		if got := before[series]; got != want {
			t.Errorf("before any request: %s = %v, want %v", series, got, want)
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(before)), func(k string) bool { return strings.HasPrefix(k, "vigil_build_info{") }) {
		t.Error("no vigil_build_info in the worker's /metrics")
	}

	wc := workerClient(t, v.Listen)
	const direct = 3
	for i := range direct {
		if got := generate(context.Background(), wc, tokenPrompt(fmt.Sprint("m", i), 2, 1, 2), nil); got.err != nil || len(got.tokens) != 2 {
			t.Fatalf("request %d: %d tokens, err %v", i, len(got.tokens), got.err)
		}
	}
	// The router, with metrics of its own, and requests through it.
	routerMetrics := addr(freePort(t))
	r := startRouter(t, c, svc, 1, "--metrics-listen", routerMetrics)
	rc := workerClient(t, r.GRPC)
	const routed = 2
	for i := range routed {
		if got := generate(context.Background(), rc, tokenPrompt(fmt.Sprint("r", i), 2, 1), nil); got.err != nil || len(got.tokens) != 2 {
			t.Fatalf("routed request %d: %d tokens, err %v", i, len(got.tokens), got.err)
		}
	}
	served := scrape(t, metricsAddr)
	for series, want := range map[string]float64{
		`vigil_worker_requests_total{outcome="ok"}`: direct + routed,
		`vigil_worker_completion_tokens_total`:      2 * (direct + routed),
		`vigil_worker_requests_in_flight`:           0,
	} {
		if got := served[series]; got != want {
			t.Errorf("after %d requests: %s = %v, want %v", direct+routed, series, got, want)
		}
	}
	rs := scrape(t, routerMetrics)
	for series, want := range map[string]float64{
		fmt.Sprintf(`vigil_route_requests_total{model=%q,status="OK",worker=%q}`, e.servedModel, v.WorkerID): routed,
		fmt.Sprintf(`vigil_route_workers{model=%q}`, e.servedModel):                                          1,
		fmt.Sprintf(`vigil_route_time_to_first_token_seconds_count{model=%q}`, e.servedModel):                routed,
	} {
		if got := rs[series]; got != want {
			t.Errorf("router: %s = %v, want %v", series, got, want)
		}
	}

	// Sleep: withdrawn, refusing, counted.
	slept := time.Now()
	m.post(t, "/sleep", nil)
	awaitMetric(t, metricsAddr, `vigil_worker_withdrawals_total{cause="not_ready"}`, 1, 10*time.Second)
	t.Logf("withdrawal counted %s after POST /sleep", time.Since(slept).Round(time.Millisecond))
	c.passing(t, svc, 10*time.Second, count(0))
	awaitMetric(t, metricsAddr, "vigil_worker_registered", 0, 10*time.Second)
	asleep := scrape(t, metricsAddr)
	for series, want := range map[string]float64{
		`vigil_engine_availability{availability="not_ready"}`: 1,
		`vigil_lifecycle_state{state="not_ready"}`:            1,
	} {
		if got := asleep[series]; got != want {
			t.Errorf("asleep: %s = %v, want %v", series, got, want)
		}
	}
	if got := generate(context.Background(), wc, tokenPrompt("asleep", 2, 1), nil); got.err == nil {
		t.Error("a request to the sleeping worker succeeded")
	}
	if got := scrape(t, metricsAddr)[`vigil_worker_requests_total{outcome="refused"}`]; got != 1 {
		t.Errorf("refused requests while asleep = %v, want 1", got)
	}
	r.waitWorkers(t, 0)
	// The router knows the model (seen within 10 minutes): 0, not gone.
	if got, ok := scrape(t, routerMetrics)[fmt.Sprintf(`vigil_route_workers{model=%q}`, e.servedModel)]; !ok || got != 0 {
		t.Errorf("router: vigil_route_workers for the asleep model = %v (present %v), want 0", got, ok)
	}

	// Wake: registered again, counted.
	woke := time.Now()
	m.post(t, "/wake", nil)
	awaitMetric(t, metricsAddr, `vigil_worker_reregistrations_total{cause="not_ready"}`, 1, 10*time.Second)
	t.Logf("re-registration counted %s after POST /wake", time.Since(woke).Round(time.Millisecond))
	c.passing(t, svc, 10*time.Second, count(1))
	awaitMetric(t, metricsAddr, "vigil_worker_registered", 1, 10*time.Second)
	awake := scrape(t, metricsAddr)
	if got := awake[`vigil_engine_availability{availability="serving"}`]; got != 1 {
		t.Errorf("awake: engine availability serving = %v, want 1", got)
	}
	if got := awake[`vigil_worker_withdrawals_total{cause="not_ready"}`]; got != 1 {
		t.Errorf("awake: withdrawals = %v, want still 1", got)
	}
	t.Logf("worker after the sleep and wake: %s", pick(awake, "vigil_worker_", "vigil_discovery_", "vigil_engine_"))

	v.term(t)
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}

// pick is m's samples whose names start with one of prefixes, one a
// line, sorted.
func pick(m map[string]float64, prefixes ...string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) && !strings.Contains(k, "_bucket") {
				fmt.Fprintf(&b, "\n  %s %v", k, m[k])
				break
			}
		}
	}
	return b.String()
}

// TestLivenessDuringStartupWait: while vigil waits for an engine that is
// not there yet, the worker endpoint's liveness service (vigil.liveness)
// stays SERVING and "" NOT_SERVING; once the engine serves, both serve;
// on SIGTERM liveness turns NOT_SERVING.
func TestLivenessDuringStartupWait(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	engineAddr := addr(freePort(t))
	dir := t.TempDir()
	v := startVigil(t, vigilOpts{engine: e, engineAddr: engineAddr, discovery: "file", registry: dir, service: "llm"})
	v.waitLine("waiting for engine", 30*time.Second)
	conn, err := grpc.NewClient(v.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health Check %q: %v", service, err)
		}
		return r.GetStatus()
	}
	// Watch liveness from the start of the wait: it must not change until
	// the stop.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := h.Watch(wctx, &healthpb.HealthCheckRequest{Service: "vigil.liveness"})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan healthpb.HealthCheckResponse_ServingStatus, 8)
	go func() {
		defer close(changes)
		for {
			r, err := watch.Recv()
			if err != nil {
				return
			}
			changes <- r.GetStatus()
		}
	}()
	if st := <-changes; st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness at the start of the wait = %s, want SERVING", st)
	}
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf(`readiness ("") during the startup wait = %s, want NOT_SERVING`, st)
	}
	// vigil retries the absent engine meanwhile; liveness holds. Three
	// seconds of waiting, against which a change would show.
	select {
	case st := <-changes:
		t.Fatalf("liveness changed to %s during the startup wait", st)
	case <-time.After(3 * time.Second):
	}
	if st := check("vigil.liveness"); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness after 3s of the startup wait = %s, want SERVING", st)
	}
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf(`readiness ("") after 3s of the startup wait = %s, want NOT_SERVING`, st)
	}

	// The engine comes: the worker serves, both SERVING.
	startMock(t, e, harness.MockOpts{GRPC: engineAddr})
	v.waitLine("worker registered", 30*time.Second)
	if st := check(""); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf(`readiness ("") once serving = %s, want SERVING`, st)
	}
	if st := check("vigil.liveness"); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness once serving = %s, want SERVING", st)
	}
	v.signal(syscall.SIGTERM)
	select {
	case st, ok := <-changes:
		if ok && st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("liveness after SIGTERM changed to %s, want NOT_SERVING", st)
		}
		if !ok {
			t.Error("liveness watch ended after SIGTERM without NOT_SERVING")
		}
	case <-time.After(exitBound):
		t.Error("liveness did not change after SIGTERM")
	}
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}
