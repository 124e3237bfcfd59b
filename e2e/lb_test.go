package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// lbRouter is one worker (e's mock and its vigil) on a file registry and
// vigil route over it with extra flags, once the router knows the worker.
func lbRouter(t *testing.T, e *engine, mo harness.MockOpts, extra ...string) (*mock, *router) {
	t.Helper()
	dir, svc := t.TempDir(), "llm"
	m := startMock(t, e, mo)
	v := startVigil(t, fileRegistry{dir, svc}.opts(vigilOpts{engine: e, engineAddr: m.GRPC}))
	v.waitLine("worker registered", 30*time.Second)
	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProc(t, "vigil route", vigilBin, append([]string{"route", "--discovery", "file", "--registry-dir", dir,
		"--service-name", svc, "--listen", r.GRPC, "--http-listen", r.HTTP}, extra...)...)
	r.waitLine("worker joined: addr="+v.Listen, 30*time.Second)
	return m, r
}

// lbPrompt is a prompt e takes, as JSON: text, or token ids.
func lbPrompt(e *engine) string {
	if e.textPrompts {
		return `"Hello"`
	}
	return `[9906]`
}

// openStream posts a streamed completion and returns its response once
// the status line came, and a reader of its body.
func openStream(t *testing.T, url, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// finished reports whether an SSE body of completion events (every line
// data or blank) ends with a token event, the finish (length) and [DONE].
func finished(body string) bool {
	events, done := sseData(body)
	n := len(events)
	return done && n >= 2 && strings.Contains(events[n-1], `"finish_reason":"length"`) &&
		strings.Count(body, "data: ") == n+1 && strings.Count(body, "\n\n") == n+1
}

// TestRouterStreamHeartbeat: issue 23, item 2. A streamed request whose
// engine holds it before its first token (a long queue or prefill) gets
// 200 text/event-stream and SSE comments every --stream-heartbeat, which
// keep a load balancer's read timeout from cutting it, then the normal
// stream: read raw, and by the openai npm package, which ignores the
// comments.
func TestRouterStreamHeartbeat(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	m, r := lbRouter(t, e, harness.MockOpts{TokenDelay: delay(0)}, "--stream-heartbeat", "100ms", "--log-level", "debug")
	const committed = "no first token yet: stream committed"
	base := "http://" + r.HTTP

	t.Run("raw", func(t *testing.T) {
		m.post(t, "/hold", map[string]int{"at_token": 0})
		resp, br := openStream(t, base+"/v1/completions",
			`{"model":"`+e.servedModel+`","prompt":`+lbPrompt(e)+`,"max_tokens":4,"stream":true}`)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("held stream: %d %s, want 200 text/event-stream before the first token", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if line, err := br.ReadString('\n'); err != nil || line != ": keepalive\n" {
			t.Fatalf("held stream's first line %q (%v), want the heartbeat comment", line, err)
		}
		m.post(t, "/release", nil)
		data, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		if !finished(strings.ReplaceAll(string(data), ": keepalive\n\n", "")) {
			t.Errorf("after the heartbeats: want the tokens, the finish (length) and [DONE]:\n%s", data)
		}
	})

	t.Run("openai package", func(t *testing.T) {
		node, dir := appsNode(t)
		m.post(t, "/hold", map[string]int{"at_token": 0})
		var out, stderr bytes.Buffer
		cmd := exec.Command(node, filepath.Join(dir, "complete.mjs"), base+"/v1", e.servedModel, lbPrompt(e))
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The second stream committed by heartbeats is this one.
		r.waitCount(t, committed, 2, 30*time.Second)
		m.post(t, "/release", nil)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("node client: %v\n%s%s", err, out.Bytes(), stderr.Bytes())
		}
		var got struct {
			Chunks int
			Finish string
			Usage  *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &got); err != nil {
			t.Fatalf("client output %q: %v", out.Bytes(), err)
		}
		if got.Chunks < 2 || got.Finish != "length" || got.Usage == nil || got.Usage.CompletionTokens != 8 {
			t.Errorf("client got %+v (usage %+v), want a streamed completion of 8 tokens ending with length", got, got.Usage)
		}
	})
}

// TestRouterShutdownDelay: issue 23, item 4. At SIGTERM, vigil route with
// --shutdown-delay says 503 on /health at once, yet serves a new request
// on a new connection for the delay; a stream in flight finishes within
// --grace-period after the listeners close, and the router exits 0.
func TestRouterShutdownDelay(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	// 400 tokens 20 ms apart: a stream of 8 s, past the 3 s delay.
	_, r := lbRouter(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)},
		"--shutdown-delay", "3s", "--grace-period", "20s")
	base := "http://" + r.HTTP
	completion := func(tokens int, stream bool) string {
		b, _ := json.Marshal(map[string]any{"model": e.servedModel, "max_tokens": tokens, "stream": stream})
		return strings.Replace(string(b), "{", `{"prompt":`+lbPrompt(e)+`,`, 1)
	}
	resp, br := openStream(t, base+"/v1/completions", completion(400, true))
	if _, err := br.ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d, %v; want 200 and its first event", resp.StatusCode, err)
	}
	streamed := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(br)
		streamed <- string(data)
	}()

	r.signal(syscall.SIGTERM)
	r.waitLine("stopping: health not serving", exitBound)
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := fresh.Get(base + "/health"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health at SIGTERM: %v, %v; want 503 at once", resp, err)
	} else {
		resp.Body.Close()
	}
	pr, err := fresh.Post(base+"/v1/completions", "application/json", strings.NewReader(completion(2, false)))
	if err != nil || pr.StatusCode != http.StatusOK {
		t.Errorf("a new request during the shutdown delay: %v, %v; want it served (200)", pr, err)
	}
	if pr != nil {
		pr.Body.Close()
	}
	if l := r.findLine("shutdown delay over"); l != "" {
		t.Fatalf("the delay ended before the checks (the machine is too slow for this test): %s", l)
	}

	r.waitLine("shutdown delay over", exitBound)
	body := <-streamed
	if !finished(body) {
		t.Errorf("the stream in flight did not finish within the grace period; its end:\n%s", body[max(0, len(body)-500):])
	}
	if code := r.wait(exitBound); code != 0 {
		t.Errorf("vigil route exit code = %d, want 0", code)
	}
}
