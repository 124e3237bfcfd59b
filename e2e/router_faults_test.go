package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// workerMaxRequestBytes is the largest request a worker takes
// (workerapi.MaxRequestBytes, internal to the host module): gRPC's 4 MiB
// less 64 KiB.
const workerMaxRequestBytes = 4<<20 - 64<<10

// httpAnswer is what a client saw of one HTTP request to the router.
type httpAnswer struct {
	code       int
	retryAfter string
	body       string
	// err is the OpenAI error body's error, if any.
	err struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
}

// complete POSTs a completion request for model with prompt (JSON) to the
// router.
func (r *router) complete(t *testing.T, model, prompt string) httpAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":2}`, model, prompt)
	resp, err := http.Post("http://"+r.HTTP+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := httpAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(data)}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || json.Unmarshal(e.Error, &a.err) != nil {
			t.Errorf("status %d with a body that is not an OpenAI error: %s", resp.StatusCode, data)
		}
	}
	return a
}

// models is the router's GET /v1/models, sorted.
func (r *router) models(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get("http://" + r.HTTP + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// waitModels polls the router's GET /v1/models, its view of discovery,
// until it lists want; the router offers no event to await.
func (r *router) waitModels(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := r.models(t)
		if slices.Equal(got, want) {
			return
		}
		if r.exited() || time.Now().After(deadline) {
			t.Fatalf("router lists models %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// healthCode is the router's GET /health status.
func (r *router) healthCode(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + r.HTTP + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOversizedPrompt: with --max-body-bytes above the workers' limit, a
// 4.3 MB prompt gets 413 once, naming the limit, and no worker is sent any
// of it (the bytes through a proxy in front of each worker say so); a
// prompt just within the limit is served, through the adapter to the
// engine.
func TestOversizedPrompt(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	type counted struct {
		m     *mock
		proxy *tcpProxy
	}
	var workers []counted
	for range 2 {
		// A model long enough for a prompt near the workers' limit: vllm-mock
		// counts a token per byte, and refuses a longer prompt as vLLM does.
		m := startMock(t, e, harness.MockOpts{Extra: []string{"--max-model-len", fmt.Sprint(8 << 20)}})
		// The worker is advertised at a proxy, which counts what the router
		// sends it; the proxy learns the worker's address once it is chosen.
		p := startTCPProxy(t, "")
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--advertise-addr", p.addr}})
		p.moveTo(v.Listen)
		v.waitLine("worker registered", 30*time.Second)
		workers = append(workers, counted{m, p})
	}
	c.passing(t, svc, 30*time.Second, count(2))
	r := startRouter(t, c, svc, 1, "--max-body-bytes", fmt.Sprint(8<<20))
	r.waitModels(t, e.servedModel)

	sent := func() (bytes []int64, requests []int) {
		for _, w := range workers {
			bytes = append(bytes, w.proxy.Sent())
			requests = append(requests, requestsTotal(t, w.m))
		}
		return bytes, requests
	}
	bytesBefore, requestsBefore := sent()
	a := r.complete(t, e.servedModel, `"`+strings.Repeat("x", 4_300_000)+`"`)
	if a.code != http.StatusRequestEntityTooLarge || a.retryAfter != "" || a.err.Type != "invalid_request_error" ||
		a.err.Param == nil || *a.err.Param != "prompt" || !strings.Contains(a.err.Message, fmt.Sprint(workerMaxRequestBytes)) {
		t.Errorf("4.3 MB prompt: %d (Retry-After %q) %s; want 413, invalid_request_error for prompt, naming the limit %d",
			a.code, a.retryAfter, a.body, workerMaxRequestBytes)
	}
	bytesAfter, requestsAfter := sent()
	t.Logf("bytes sent to the workers for the refused prompt: %d and %d", bytesAfter[0]-bytesBefore[0], bytesAfter[1]-bytesBefore[1])
	for i := range workers {
		// The connection's own frames (settings, pings) are a few bytes.
		if up := bytesAfter[i] - bytesBefore[i]; up > 64<<10 {
			t.Errorf("worker %d was sent %d bytes for the refused prompt, want none of it", i+1, up)
		}
		if requestsAfter[i] != requestsBefore[i] {
			t.Errorf("engine %d saw %d requests, want none", i+1, requestsAfter[i]-requestsBefore[i])
		}
	}

	// Within the limit, with 1 KiB for the other fields: served.
	if a := r.complete(t, e.servedModel, `"`+strings.Repeat("x", workerMaxRequestBytes-1024)+`"`); a.code != http.StatusOK {
		t.Errorf("prompt just within the workers' limit: %d %.300s, want 200", a.code, a.body)
	}
}

// TestModelBrieflyWithdrawn: with workers for models A and B, A's engine
// asleep (its worker withdrawn), a request for A gets 503 with Retry-After,
// which OpenAI clients retry, not 404; a model never seen gets 404; once A
// wakes, its requests are served again. GET /v1/models lists what serves.
func TestModelBrieflyWithdrawn(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	start := func(model string) *mock {
		m := startMock(t, e, harness.MockOpts{Model: model})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
		v.waitLine("worker registered", 30*time.Second)
		return m
	}
	mA, _ := start("model-a"), start("model-b")
	c.passing(t, svc, 30*time.Second, count(2))
	r := startRouter(t, c, svc, 1)
	r.waitModels(t, "model-a", "model-b")
	if a := r.complete(t, "model-a", `"hi"`); a.code != http.StatusOK {
		t.Fatalf("model-a while served: %d %s, want 200", a.code, a.body)
	}

	slept := time.Now()
	mA.post(t, "/sleep", nil)
	c.passing(t, svc, 30*time.Second, count(1))
	r.waitModels(t, "model-b") // GET /v1/models lists what serves now
	t.Logf("sleep to the router's withdrawal of model-a: %s", time.Since(slept).Round(time.Millisecond))
	a := r.complete(t, "model-a", `"hi"`)
	if a.code != http.StatusServiceUnavailable || a.retryAfter == "" || !strings.Contains(a.err.Message, `"model-a"`) {
		t.Errorf("model-a asleep: %d (Retry-After %q) %s; want 503 with Retry-After naming model-a", a.code, a.retryAfter, a.body)
	}
	if a := r.complete(t, "never-seen", `"hi"`); a.code != http.StatusNotFound || a.retryAfter != "" || a.err.Type != "invalid_request_error" ||
		a.err.Code == nil || *a.err.Code != "model_not_found" {
		t.Errorf("a model never seen: %d (Retry-After %q) %s; want 404 invalid_request_error model_not_found, as OpenAI's", a.code, a.retryAfter, a.body)
	}
	if a := r.complete(t, "model-b", `"hi"`); a.code != http.StatusOK {
		t.Errorf("model-b meanwhile: %d %s, want 200", a.code, a.body)
	}

	mA.post(t, "/wake", nil)
	c.passing(t, svc, 30*time.Second, count(2))
	r.waitModels(t, "model-a", "model-b")
	if a := r.complete(t, "model-a", `"hi"`); a.code != http.StatusOK {
		t.Errorf("model-a awake again: %d %s, want 200", a.code, a.body)
	}
}

// TestRouterHealth: the router's gRPC health ("" and
// vigil.worker.v1.Worker) and HTTP GET /health agree: not serving with no
// workers, serving once a worker registers, not serving once it is
// withdrawn. The gRPC Watch stream is awaited; at each change GET /health
// already says the same.
func TestRouterHealth(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	r := startRouter(t, c, svc, 0)
	conn, err := grpc.NewClient(r.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	services := []string{"", "vigil.worker.v1.Worker"}
	watches := map[string]grpc.ServerStreamingClient[healthpb.HealthCheckResponse]{}
	for _, name := range services {
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		watches[name] = w
	}
	// await reads each Watch until it reports want, then checks that Check
	// and GET /health say the same at once.
	await := func(step string, want healthpb.HealthCheckResponse_ServingStatus) time.Time {
		t.Helper()
		for _, name := range services {
			for {
				m, err := watches[name].Recv()
				if err != nil {
					t.Fatalf("%s: Watch of %q: %v", step, name, err)
				}
				if m.GetStatus() == want {
					break
				}
			}
		}
		at := time.Now()
		for _, name := range services {
			if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: name}); err != nil || resp.GetStatus() != want {
				t.Errorf("%s: Check of %q: %v, %v; want %v", step, name, resp.GetStatus(), err, want)
			}
		}
		wantHTTP := http.StatusServiceUnavailable
		if want == healthpb.HealthCheckResponse_SERVING {
			wantHTTP = http.StatusOK
		}
		if got := r.healthCode(t); got != wantHTTP {
			t.Errorf("%s: gRPC health %v but GET /health %d, want %d", step, want, got, wantHTTP)
		}
		return at
	}
	for _, name := range services {
		if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: name}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("no workers: Check of %q: %v, %v; want NOT_SERVING", name, resp.GetStatus(), err)
		}
	}
	if got := r.healthCode(t); got != http.StatusServiceUnavailable {
		t.Errorf("no workers: GET /health %d, want 503", got)
	}

	w := startConsulWorker(t, c, e, svc, addr(freePort(t)))
	_, registered := c.passing(t, svc, 30*time.Second, count(1))
	serving := await("a worker registered", healthpb.HealthCheckResponse_SERVING)
	t.Logf("passing in Consul to the router SERVING: %s", serving.Sub(registered).Round(time.Millisecond))

	slept := time.Now()
	w.m.post(t, "/sleep", nil)
	c.passing(t, svc, 30*time.Second, count(0))
	notServing := await("the worker withdrawn", healthpb.HealthCheckResponse_NOT_SERVING)
	t.Logf("engine asleep to the router NOT_SERVING: %s", notServing.Sub(slept).Round(time.Millisecond))

	w.m.post(t, "/wake", nil)
	c.passing(t, svc, 30*time.Second, count(1))
	await("the worker back", healthpb.HealthCheckResponse_SERVING)
}
