package router

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// do sends a request to the router's HTTP API and returns the status and
// the body.
func (r *testRouter) do(t *testing.T, method, path, body string) (int, http.Header, string) {
	t.Helper()
	return r.doAuth(t, method, path, body, "")
}

// doAuth is do with an Authorization header, if auth is not empty.
func (r *testRouter) doAuth(t *testing.T, method, path, body, auth string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, r.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(data)
}

func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	return m
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})

	start := time.Now().Unix()
	code, hdr, body := r.do(t, "POST", "/v1/completions",
		`{"model":"m","prompt":"say hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":-1,"seed":7,
		  "stop":"x","n":1,"ignore_eos":true,"user":"u","logit_bias":{}}`)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s, want 200 application/json:\n%s", code, hdr.Get("Content-Type"), body)
	}
	got := decode(t, body)
	id, _ := got["id"].(string)
	created, _ := got["created"].(float64)
	if !strings.HasPrefix(id, "cmpl-") || len(id) < len("cmpl-")+8 {
		t.Errorf("id = %q, want cmpl-<request id>", id)
	}
	if int64(created) < start || int64(created) > time.Now().Unix() {
		t.Errorf("created = %v, want the request's Unix time", got["created"])
	}
	delete(got, "id")
	delete(got, "created")
	want := map[string]any{
		"object": "text_completion",
		"model":  "m",
		"choices": []any{map[string]any{
			"index": 0.0, "text": "hello world", "logprobs": nil, "finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 2.0, "completion_tokens": 2.0, "total_tokens": 4.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	wantReq := &workerv1.GenerateRequest{
		RequestId: id,
		Model:     "m",
		Prompt:    &workerv1.GenerateRequest_Text{Text: "say hi"},
		Sampling:  &workerv1.Sampling{Temperature: proto.Float32(0.5), TopP: proto.Float32(0.9), TopK: proto.Uint32(0), Seed: proto.Int64(7)},
		Stopping:  &workerv1.Stopping{MaxTokens: 5, Stop: []string{"x"}, IgnoreEos: true},
	}
	if diff := cmp.Diff(wantReq, a.lastRequest(), protocmp.Transform()); diff != "" {
		t.Errorf("request sent to the worker (-want +got):\n%s", diff)
	}
}

func TestCompletionMapsRequest(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	for _, tc := range []struct {
		name string
		body string
		want *workerv1.GenerateRequest
	}{
		{
			name: "token ids and defaults",
			body: `{"model":"m","prompt":[1, 2, 4294967295]}`,
			want: &workerv1.GenerateRequest{
				Model:    "m",
				Prompt:   &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: []uint32{1, 2, 4294967295}}},
				Sampling: &workerv1.Sampling{},
				Stopping: &workerv1.Stopping{MaxTokens: 16},
			},
		},
		{
			name: "null fields and stop list",
			body: `{"model":"m","prompt":"p","max_tokens":null,"temperature":null,"stop":["a","b"],"n":null,"top_k":40,"stream_options":null}`,
			want: &workerv1.GenerateRequest{
				Model:    "m",
				Prompt:   &workerv1.GenerateRequest_Text{Text: "p"},
				Sampling: &workerv1.Sampling{TopK: proto.Uint32(40)},
				Stopping: &workerv1.Stopping{MaxTokens: 16, Stop: []string{"a", "b"}},
			},
		},
		{
			name: "no model",
			body: `{"prompt":"p","temperature":0}`,
			want: &workerv1.GenerateRequest{
				Prompt:   &workerv1.GenerateRequest_Text{Text: "p"},
				Sampling: &workerv1.Sampling{Temperature: proto.Float32(0)},
				Stopping: &workerv1.Stopping{MaxTokens: 16},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := r.do(t, "POST", "/v1/completions", tc.body)
			if code != http.StatusOK {
				t.Fatalf("got %d, want 200:\n%s", code, body)
			}
			if m := decode(t, body)["model"]; m != "m" {
				t.Errorf("model = %v, want m (the worker's when the request names none)", m)
			}
			got := proto.Clone(a.lastRequest()).(*workerv1.GenerateRequest)
			got.RequestId = ""
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("request sent to the worker (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletionStream: OpenAI's stream: a chunk per worker chunk, one with
// the finish reason, then [DONE]. Without stream_options.include_usage no
// event has a usage key; with it every event has "usage": null but one
// more, last, which has the usage and "choices": [].
func TestCompletionStream(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})

	for _, tc := range []struct {
		name      string
		options   string
		wantUsage bool
	}{
		{"without usage", ``, false},
		{"usage not asked", `,"stream_options":{"include_usage":false}`, false},
		{"with usage", `,"stream_options":{"include_usage":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"hi","stream":true`+tc.options+`}`)
			if code != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("got %d %s, want 200 text/event-stream:\n%s", code, hdr.Get("Content-Type"), body)
			}
			events := sseEvents(t, body)
			want := 4
			if tc.wantUsage {
				want = 5
			}
			if len(events) != want || events[want-1] != "[DONE]" {
				t.Fatalf("events = %q, want two chunks, the finish, the usage if asked, and [DONE]", events)
			}
			var texts []any
			var reasons []any
			for _, e := range events[:3] {
				m := decode(t, e)
				if !strings.HasPrefix(m["id"].(string), "cmpl-") || m["object"] != "text_completion" || m["model"] != "m" {
					t.Errorf("event %s: want id cmpl-..., object text_completion, model m", e)
				}
				usage, has := m["usage"]
				if has != tc.wantUsage || usage != nil {
					t.Errorf("event %s: usage key present %v (%v), want present %v and null", e, has, usage, tc.wantUsage)
				}
				c := m["choices"].([]any)[0].(map[string]any)
				texts = append(texts, c["text"])
				reasons = append(reasons, c["finish_reason"])
			}
			if diff := cmp.Diff([]any{"hello", " world", ""}, texts); diff != "" {
				t.Errorf("texts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]any{nil, nil, "stop"}, reasons); diff != "" {
				t.Errorf("finish reasons (-want +got):\n%s", diff)
			}
			if !tc.wantUsage {
				return
			}
			last := decode(t, events[3])
			if diff := cmp.Diff(map[string]any{"prompt_tokens": 1.0, "completion_tokens": 2.0, "total_tokens": 3.0}, last["usage"]); diff != "" {
				t.Errorf("usage of the last event (-want +got):\n%s", diff)
			}
			if choices, ok := last["choices"].([]any); !ok || len(choices) != 0 {
				t.Errorf("choices of the usage event = %v, want []", last["choices"])
			}
		})
	}
}

func TestCompletionStreamFailsAfterStart(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	a.set(func(w *fakeWorker) { w.breakAfterChunk = true })
	r := startRouter(t, []*fakeWorker{a})

	code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"hi","stream":true}`)
	if code != http.StatusOK {
		t.Fatalf("got %d, want 200 (the stream had started):\n%s", code, body)
	}
	events := sseEvents(t, body)
	if len(events) != 2 {
		t.Fatalf("events = %q, want a chunk and an error, no [DONE]", events)
	}
	want := map[string]any{"error": map[string]any{"message": "engine lost", "type": "server_error", "param": nil, "code": nil}}
	if diff := cmp.Diff(want, decode(t, events[1])); diff != "" {
		t.Errorf("error event (-want +got):\n%s", diff)
	}
}

// sseEvents returns the data of each event of a server-sent event stream,
// checking the framing.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Errorf("stream does not end with a blank line: %q", body)
	}
	var events []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Errorf("line %q: want data: ...", line)
		}
		events = append(events, data)
	}
	return events
}

func TestCompletionErrors(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	refusing := startWorker(t, "r", "busy")
	refusing.set(func(w *fakeWorker) { w.refuse = codes.ResourceExhausted })
	invalid := startWorker(t, "i", "tokens-only")
	invalid.set(func(w *fakeWorker) { w.refuse = codes.InvalidArgument })
	broken := startWorker(t, "b", "broken")
	broken.set(func(w *fakeWorker) { w.breakAfterChunk = true })
	r := startRouter(t, []*fakeWorker{a, refusing, invalid, broken}, withMaxBody(256))
	empty := startRouter(t, nil)

	for _, tc := range []struct {
		name       string
		router     *testRouter
		method     string
		path, body string
		wantCode   int
		wantType   string
		wantParam  any
		wantMsg    string
	}{
		{"n=2", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","n":2}`, 400, "invalid_request_error", "n", "n"},
		{"n=0", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","n":0}`, 400, "invalid_request_error", "n", "n"},
		{"n=129", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","n":129}`, 400, "invalid_request_error", "n", "128"},
		{"unknown model", r, "POST", "/v1/completions", `{"model":"nope","prompt":"p"}`, 404, "invalid_request_error", "model", `"nope"`},
		{"no workers", empty, "POST", "/v1/completions", `{"model":"m","prompt":"p"}`, 503, "server_error", nil, "no workers"},
		{"body too large", r, "POST", "/v1/completions", `{"model":"m","prompt":"` + strings.Repeat("x", 300) + `"}`, 413, "invalid_request_error", nil, "256 bytes"},
		{"bad JSON", r, "POST", "/v1/completions", `{"model":`, 400, "invalid_request_error", nil, "JSON"},
		{"not an object", r, "POST", "/v1/completions", `[1]`, 400, "invalid_request_error", nil, "JSON object"},
		{"wrong type", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","max_tokens":"many"}`, 400, "invalid_request_error", "max_tokens", "max_tokens"},
		{"empty prompt", r, "POST", "/v1/completions", `{"model":"m","prompt":""}`, 400, "invalid_request_error", "prompt", "prompt"},
		{"empty token ids", r, "POST", "/v1/completions", `{"model":"m","prompt":[]}`, 400, "invalid_request_error", "prompt", "prompt"},
		{"no prompt", r, "POST", "/v1/completions", `{"model":"m"}`, 400, "invalid_request_error", "prompt", "prompt"},
		{"empty string in a batch", r, "POST", "/v1/completions", `{"model":"m","prompt":["a",""]}`, 400, "invalid_request_error", "prompt", "prompt[1]"},
		{"empty ids in a batch", r, "POST", "/v1/completions", `{"model":"m","prompt":[[1],[]]}`, 400, "invalid_request_error", "prompt", "prompt[1]"},
		{"mixed batch", r, "POST", "/v1/completions", `{"model":"m","prompt":["a",[1]]}`, 400, "invalid_request_error", "prompt", "prompt[1]"},
		{"nested too deep", r, "POST", "/v1/completions", `{"model":"m","prompt":[[[1]]]}`, 400, "invalid_request_error", "prompt", "prompt[0]"},
		{"negative token", r, "POST", "/v1/completions", `{"model":"m","prompt":[-1]}`, 400, "invalid_request_error", "prompt", "prompt"},
		{"fractional token", r, "POST", "/v1/completions", `{"model":"m","prompt":[1.5]}`, 400, "invalid_request_error", "prompt", "prompt"},
		{"zero max_tokens", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","max_tokens":0}`, 400, "invalid_request_error", "max_tokens", "max_tokens"},
		{"bad top_k", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","top_k":-2}`, 400, "invalid_request_error", "top_k", "top_k"},
		{"bad stop", r, "POST", "/v1/completions", `{"model":"m","prompt":"p","stop":[1]}`, 400, "invalid_request_error", "stop", "stop"},
		{"worker full", r, "POST", "/v1/completions", `{"model":"busy","prompt":"p"}`, 429, "rate_limit_error", nil, "refuses"},
		{"worker rejects", r, "POST", "/v1/completions", `{"model":"tokens-only","prompt":"p"}`, 400, "invalid_request_error", nil, "refuses"},
		{"engine lost", r, "POST", "/v1/completions", `{"model":"broken","prompt":"p"}`, 503, "server_error", nil, "engine lost"},
		{"stream to unknown model", r, "POST", "/v1/completions", `{"model":"nope","prompt":"p","stream":true}`, 404, "invalid_request_error", "model", "nope"},
		{"GET completions", r, "GET", "/v1/completions", ``, 405, "invalid_request_error", nil, "POST"},
		{"POST models", r, "POST", "/v1/models", ``, 405, "invalid_request_error", nil, "GET"},
		{"unknown path", r, "GET", "/v1/chat", ``, 404, "not_found_error", nil, "/v1/chat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := tc.router.do(t, tc.method, tc.path, tc.body)
			if code != tc.wantCode || hdr.Get("Content-Type") != "application/json" {
				t.Errorf("got %d %s, want %d application/json", code, hdr.Get("Content-Type"), tc.wantCode)
			}
			e, _ := decode(t, body)["error"].(map[string]any)
			msg, _ := e["message"].(string)
			var wantCode any
			if tc.wantCode == http.StatusNotFound && tc.wantParam == "model" {
				wantCode = "model_not_found" // OpenAI's
			}
			if e["type"] != tc.wantType || e["param"] != tc.wantParam || e["code"] != wantCode || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error = %v, want type %s, param %v, code %v, a message containing %q", e, tc.wantType, tc.wantParam, wantCode, tc.wantMsg)
			}
		})
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	start := time.Now().Unix()
	ws := []*fakeWorker{startWorker(t, "a", "zeta"), startWorker(t, "b", "alpha"), startWorker(t, "c", "zeta")}
	// vLLM's max_model_len, from the workers' discovery metadata: the
	// largest of a model's workers; absent when none publishes it.
	ws[0].ep.MaxModelLen, ws[2].ep.MaxModelLen = 2048, 4096
	for _, tc := range []struct {
		name    string
		workers []*fakeWorker
		want    []any
	}{
		{"none", nil, []any{}},
		{"sorted, each once", ws, []any{
			map[string]any{"id": "alpha", "object": "model", "owned_by": "vigil"},
			map[string]any{"id": "zeta", "object": "model", "owned_by": "vigil", "max_model_len": 4096.0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRouter(t, tc.workers)
			code, _, body := r.do(t, "GET", "/v1/models", "")
			if code != http.StatusOK {
				t.Fatalf("got %d, want 200:\n%s", code, body)
			}
			got := decode(t, body)
			// created is when the router first saw the model: set, and past.
			for _, m := range got["data"].([]any) {
				m := m.(map[string]any)
				if c, _ := m["created"].(float64); c < float64(start) || c > float64(time.Now().Unix()) {
					t.Errorf("model %v: created %v, want the Unix time the router saw it", m["id"], m["created"])
				}
				delete(m, "created")
			}
			want := map[string]any{"object": "list", "data": tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompletionTimeout(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "m")
	a.set(func(w *fakeWorker) { w.hold = true })
	r := startRouter(t, []*fakeWorker{a}, withTimeout(100*time.Millisecond))

	code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"p"}`)
	if code != http.StatusGatewayTimeout {
		t.Errorf("got %d, want 504:\n%s", code, body)
	}
	if e, _ := decode(t, body)["error"].(map[string]any); e["type"] != "server_error" {
		t.Errorf("error = %v, want type server_error", e)
	}
	<-a.cancelled // the deadline reached the worker's call
}

// TestOpenAIField: a worker's, the pool's or an adapter's INVALID_ARGUMENT
// names its field first, in the worker API's terms; OpenAI's error gives
// the request's own name, as param and in the message.
func TestOpenAIField(t *testing.T) {
	t.Parallel()
	completion := fieldNames{prompt: "prompt", maxTokens: "max_tokens"}
	chat := fieldNames{prompt: "messages", maxTokens: "max_completion_tokens"}
	for _, tc := range []struct {
		msg       string
		names     fieldNames
		wantParam string
		wantMsg   string
	}{
		{`prompt: the workers of model "m" take token ids only, not text`, completion, "prompt", `prompt: the workers of model "m" take token ids only, not text`},
		{"prompt.text: this worker's engine takes token ids only; send prompt.token_ids", completion, "prompt", "prompt: this worker's engine takes token ids only; send token ids"},
		{"stopping.max_tokens: 5000 plus the prompt's 3 tokens exceeds the model's maximum length 4096", chat, "max_completion_tokens",
			"max_completion_tokens: 5000 plus the prompt's 3 tokens exceeds the model's maximum length 4096"},
		{"prompt.messages[2].role: must not be empty", chat, "messages", "messages[2].role: must not be empty"},
		{"sampling.top_p: 1.5: must be in (0, 1]", completion, "top_p", "top_p: 1.5: must be in (0, 1]"},
		{"seed: SGLang's API takes no sampling seed", chat, "seed", "seed: SGLang's API takes no sampling seed"},
		{"vLLM rejected the request: The decoder prompt (length 5000) is longer", completion, "", "vLLM rejected the request: The decoder prompt (length 5000) is longer"},
		{"no field here", completion, "", "no field here"},
	} {
		param, msg := openAIField(tc.msg, tc.names)
		if param != tc.wantParam || msg != tc.wantMsg {
			t.Errorf("openAIField(%q) = %q, %q; want %q, %q", tc.msg, param, msg, tc.wantParam, tc.wantMsg)
		}
	}
}

// A model whose workers are away gets 503 with Retry-After, which OpenAI
// clients retry, and is not listed in /v1/models; an unknown model gets
// 404, without Retry-After.
func TestWithdrawnModel(t *testing.T) {
	t.Parallel()
	a, b := startWorker(t, "a", "A"), startWorker(t, "b", "B")
	r := startRouter(t, []*fakeWorker{a, b})
	r.pool.Update(endpoints(b))

	code, hdr, body := r.do(t, "POST", "/v1/completions", `{"model":"A","prompt":"p"}`)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "5" || !strings.Contains(body, `\"A\"`) {
		t.Errorf("withdrawn model: %d Retry-After %q %s, want 503, Retry-After 5, naming the model", code, hdr.Get("Retry-After"), body)
	}
	code, hdr, body = r.do(t, "POST", "/v1/completions", `{"model":"C","prompt":"p","stream":true}`)
	if code != http.StatusNotFound || hdr.Get("Retry-After") != "" {
		t.Errorf("never-seen model: %d Retry-After %q %s, want 404 without Retry-After", code, hdr.Get("Retry-After"), body)
	}
	_, _, body = r.do(t, "GET", "/v1/models", "")
	if strings.Contains(body, `"A"`) || !strings.Contains(body, `"B"`) {
		t.Errorf("/v1/models: %s, want B alone", body)
	}
	r.pool.Update(endpoints(a, b))
	if code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"A","prompt":"p"}`); code != http.StatusOK {
		t.Errorf("model back: %d %s, want 200", code, body)
	}
}
