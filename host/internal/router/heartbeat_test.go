package router

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// heldStream is a streamed request through r whose worker holds it: the
// response as soon as its status line came, and a reader of its body.
func heldStream(t *testing.T, r *testRouter, path, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", r.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// awaitHeartbeat checks that a held stream was committed as an event
// stream and that its first line is a heartbeat comment.
func awaitHeartbeat(t *testing.T, resp *http.Response, br *bufio.Reader) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("held stream: %d %s, want 200 text/event-stream before the first token", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	line, err := br.ReadString('\n')
	if err != nil || line != ": keepalive\n" {
		t.Fatalf("held stream's first line %q (%v), want the heartbeat comment", line, err)
	}
}

// rest reads the rest of a stream and drops its heartbeats.
func rest(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	data, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), heartbeatComment, "")
}

// A stream whose worker sends nothing for longer than the heartbeat
// interval (a long queue or prefill) is committed and kept alive with SSE
// comments, which a load balancer's read timeout sees as traffic; then
// comes the normal stream, completions' and chat's.
func TestStreamHeartbeatBeforeFirstToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, body, first string }{
		{endpointCompletions, `{"model":"m","prompt":"p","stream":true}`, `"text":"hello"`},
		{endpointChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, `"role":"assistant"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			w := chatWorker(t, "a", "m")
			release := make(chan struct{})
			w.set(func(w *fakeWorker) { w.wait = release })
			r := startRouter(t, []*fakeWorker{w}, withHeartbeat(20*time.Millisecond))
			resp, br := heldStream(t, r, tc.path, tc.body)
			awaitHeartbeat(t, resp, br)
			close(release)
			events := sseEvents(t, rest(t, br))
			if len(events) < 4 || !strings.Contains(events[0], tc.first) || events[len(events)-1] != "[DONE]" {
				t.Errorf("after the heartbeats: %q, want the stream (first event with %s) and [DONE]", events, tc.first)
			}
		})
	}
}

// Before the first token nothing of the answer was sent, heartbeats or
// not, so a worker that refuses the request after a while still sends it
// to another; a failure after the heartbeats, with no worker left, is
// OpenAI's error event (the error the status would have carried), then
// the stream's end.
func TestStreamHeartbeatThenRetryOrFailure(t *testing.T) {
	t.Parallel()
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		a, b := startWorker(t, "a", "m"), startWorker(t, "b", "m")
		r := startRouter(t, []*fakeWorker{a, b}, withHeartbeat(20*time.Millisecond))
		// Round-robin: the worker that did not take this one takes the next.
		if code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"p"}`); code != http.StatusOK {
			t.Fatalf("first request: %d %s", code, body)
		}
		next := a
		if a.requests.Load() == 1 {
			next = b
		}
		release := make(chan struct{})
		next.set(func(w *fakeWorker) { w.wait, w.refuse = release, codes.Unavailable })
		resp, br := heldStream(t, r, endpointCompletions, `{"model":"m","prompt":"p","stream":true}`)
		awaitHeartbeat(t, resp, br)
		close(release)
		events := sseEvents(t, rest(t, br))
		if len(events) != 4 || !strings.Contains(events[0], `"text":"hello"`) || events[3] != "[DONE]" {
			t.Errorf("after a refusal behind heartbeats: %q, want the other worker's stream", events)
		}
		if got := counts(a, b); got != "a=2 b=1" && got != "a=1 b=2" {
			t.Errorf("requests %s, want the refused one retried on the other worker", got)
		}
	})
	t.Run("failure", func(t *testing.T) {
		t.Parallel()
		w := startWorker(t, "a", "m")
		release := make(chan struct{})
		w.set(func(w *fakeWorker) { w.wait, w.fail = release, status.Error(codes.Unavailable, "engine lost") })
		r := startRouter(t, []*fakeWorker{w}, withHeartbeat(20*time.Millisecond))
		resp, br := heldStream(t, r, endpointCompletions, `{"model":"m","prompt":"p","stream":true}`)
		awaitHeartbeat(t, resp, br)
		close(release)
		events := sseEvents(t, rest(t, br))
		if len(events) != 1 {
			t.Fatalf("after the heartbeats: %q, want one error event and the end (no [DONE])", events)
		}
		e := decode(t, events[0])["error"].(map[string]any)
		want := map[string]any{"message": "engine lost", "type": "server_error", "param": nil, "code": nil}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("error event (-want +got):\n%s", diff)
		}
	})
}
