package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// router is a running `vigil route`.
type router struct {
	*proc
	GRPC, HTTP string
}

// startRouter starts vigil route over Consul, with extra flags, and waits
// until it knows want workers.
func startRouter(t *testing.T, c *consulAgent, service string, want int, extra ...string) *router {
	t.Helper()
	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProcEnv(t, "vigil route", c.env(), vigilBin, append([]string{"route", "--discovery", "consul",
		"--service-name", service, "--listen", r.GRPC, "--http-listen", r.HTTP}, extra...)...)
	r.waitWorkers(t, want)
	return r
}

// waitWorkers polls the router's GET /health, its view of discovery, until
// it knows a worker (want > 0) or knows none (want 0); the router offers no
// event to await.
func (r *router) waitWorkers(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.HTTP + "/health")
		if err == nil {
			resp.Body.Close()
			if (resp.StatusCode == http.StatusOK) == (want > 0) {
				return
			}
		}
		if r.exited() || time.Now().After(deadline) {
			t.Fatalf("router did not see %d workers (last: %v)", want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consulWorker is one engine and its vigil, registered in Consul.
type consulWorker struct {
	m *mock
	v *vigil
}

// startConsulWorker starts e's mock on engineAddr and its vigil, and waits
// until the worker is registered.
func startConsulWorker(t *testing.T, c *consulAgent, e *engine, svc, engineAddr string) consulWorker {
	t.Helper()
	m := startMock(t, e, harness.MockOpts{GRPC: engineAddr, TokenDelay: delay(10 * time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
	v.waitLine("worker registered", 30*time.Second)
	return consulWorker{m, v}
}

func requestsTotal(t *testing.T, m *mock) int { return m.state(t).RequestsTotal }

// TestRouterSpreadsAndFailsOver: two workers behind vigil route share the
// load; when engine 1 dies under a long request, that request ends with a
// clear error, the next 20 succeed on worker 2 and vigil 1 exits 1; with
// engine 1 and vigil 1 back, requests spread over both again.
func TestRouterSpreadsAndFailsOver(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	w1 := startConsulWorker(t, c, e, svc, addr(freePort(t)))
	w2 := startConsulWorker(t, c, e, svc, addr(freePort(t)))
	c.passing(t, svc, 30*time.Second, count(2))
	r := startRouter(t, c, svc, 1)
	rc := workerClient(t, r.GRPC)

	send := func(n int) {
		t.Helper()
		for i := range n {
			if got := generate(context.Background(), rc, tokenPrompt(fmt.Sprint("r", i), 2, 1), nil); got.err != nil || len(got.tokens) != 2 {
				t.Fatalf("request %d through the router: %d tokens, err %v", i, len(got.tokens), got.err)
			}
		}
	}
	base1, base2 := requestsTotal(t, w1.m), requestsTotal(t, w2.m)
	send(20)
	if n1, n2 := requestsTotal(t, w1.m)-base1, requestsTotal(t, w2.m)-base2; n1 == 0 || n2 == 0 {
		t.Fatalf("requests per engine = %d and %d, want both used", n1, n2)
	}

	// A long request: kill whichever engine serves it.
	started := make(chan struct{})
	done := make(chan completion, 1)
	go func() {
		var once bool
		done <- generate(context.Background(), rc, tokenPrompt("long", 3000, 1), func(int) {
			if !once {
				once = true
				close(started)
			}
		})
	}()
	<-started
	victim, survivor := w1, w2
	if w2.m.state(t).InFlight == 1 {
		victim, survivor = w2, w1
	}
	victim.m.signal(syscall.SIGKILL)
	select {
	case res := <-done:
		if status.Code(res.err) != codes.Unavailable || res.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR {
			t.Errorf("long request ended with final %v, status %v; want ERROR then Unavailable", res.final, res.err)
		}
	case <-time.After(exitBound):
		t.Fatal("the long request hung after its engine died")
	}
	if code := victim.v.wait(exitBound); code != 1 {
		t.Errorf("vigil of the killed engine exited %d, want 1", code)
	}
	base := requestsTotal(t, survivor.m)
	send(20)
	if n := requestsTotal(t, survivor.m) - base; n != 20 {
		t.Errorf("surviving engine got %d of the 20 requests, want all", n)
	}

	// Engine 1 and vigil 1 back (on the victim's address): spread again.
	back := startConsulWorker(t, c, e, svc, victim.m.GRPC)
	c.passing(t, svc, 30*time.Second, count(2))
	waitSpread := time.Now().Add(10 * time.Second)
	for {
		b1, b2 := requestsTotal(t, back.m), requestsTotal(t, survivor.m)
		send(10)
		if requestsTotal(t, back.m) > b1 && requestsTotal(t, survivor.m) > b2 {
			break
		}
		if time.Now().After(waitSpread) {
			t.Fatal("requests did not spread over the restarted worker")
		}
	}
}

// TestRouterHTTP: ordinary clients get streamed completions through vigil
// route: curl with SSE, and the official openai package; bad requests get a
// 400 naming the field and the worker keeps serving.
func TestRouterHTTP(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, testRouterHTTP)
}

func testRouterHTTP(t *testing.T, e *engine) {
	skipWithoutRequests(t, e)
	c := consulFor(t)
	svc := uniqueService(t)
	startConsulWorker(t, c, e, svc, addr(freePort(t)))
	r := startRouter(t, c, svc, 1)
	base := "http://" + r.HTTP
	// body is a completion request for the engine's model with prompt
	// (JSON) and more fields.
	body := func(prompt, more string) string {
		return fmt.Sprintf(`{"model":%q,"prompt":%s%s}`, e.servedModel, prompt, more)
	}
	// hello is a prompt the engine takes: text, or token ids for an
	// engine that takes token ids only.
	hello, hi := `"Hello"`, `"hi"`
	if !e.textPrompts {
		hello, hi = `[9906]`, `[6151]`
	}

	t.Run("curl SSE", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed")
		}
		out, err := exec.Command("curl", "-sSN", "--max-time", "30", base+"/v1/completions",
			"-H", "Content-Type: application/json",
			"-d", body(hello, `,"max_tokens":5,"stream":true`)).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		// Tokens that wait while the hop is busy go out as one event, so
		// the count of token events is the machine's, not the router's.
		events := strings.Count(string(out), "data: ")
		if events < 3 || !strings.Contains(string(out), `"finish_reason":"length"`) || !strings.HasSuffix(strings.TrimSpace(string(out)), "data: [DONE]") {
			t.Errorf("want token events, a final one (finish_reason length) and [DONE]; got:\n%s", out)
		}
	})

	t.Run("openai package", func(t *testing.T) {
		node, dir := appsNode(t)
		out, err := exec.Command(node, filepath.Join(dir, "complete.mjs"), base+"/v1", e.servedModel, hello).Output()
		if err != nil {
			t.Fatalf("node client: %v\n%s", err, out)
		}
		var got struct {
			Chunks int
			Text   string
			Finish string
			Usage  *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &got); err != nil {
			t.Fatalf("client output %q: %v", out, err)
		}
		if got.Chunks < 2 || got.Text == "" && e.tokenText != nil || got.Finish != "length" {
			t.Errorf("client got %+v, want a streamed completion of 8 tokens ending with length", got)
		}
		if got.Usage == nil || got.Usage.CompletionTokens != 8 {
			t.Errorf("client got usage %+v, want 8 completion tokens from the usage chunk", got.Usage)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		type badBody struct {
			body  string
			code  int
			field string
		}
		cases := []badBody{
			{body(`""`, `,"max_tokens":5`), 400, "prompt"},
			{body(hi, `,"n":129`), 400, "n"},
			{`{"model":"no-such-model","prompt":` + hi + `}`, 404, "no-such-model"},
		}
		if e.maxModelLen > 0 {
			cases = append(cases, badBody{body(hi, `,"max_tokens":100000`), 400, "max_tokens"})
		}
		if !e.textPrompts {
			cases = append(cases, badBody{body(`"hi"`, `,"max_tokens":5`), 400, "prompt"})
		}
		for _, tc := range cases {
			resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.field) {
				t.Errorf("%s: %d %s, want %d naming %q", tc.body, resp.StatusCode, b, tc.code, tc.field)
			}
		}
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body(hi, `,"max_tokens":3`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("after bad requests: status %d, want 200", resp.StatusCode)
		}
	})
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
