package router

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// chatWorker is a fakeWorker with a chat template (Registration.Chat).
func chatWorker(t *testing.T, id, model string) *fakeWorker {
	w := startWorker(t, id, model)
	w.ep.Chat = true
	return w
}

func TestChatCompletion(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})

	code, _, body := r.do(t, "POST", "/v1/chat/completions", `{"model":"m",
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]},
		            {"role":"assistant","content":null},{"role":"user","content":"again"}],
		"max_completion_tokens":7,"max_tokens":3,"temperature":0.5,"top_p":0.9,"seed":7,"stop":["x","y"],"n":1,
		"logprobs":false,"presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"user":"u","tools":[],"response_format":{"type":"text"}}`)
	if code != http.StatusOK {
		t.Fatalf("got %d, want 200:\n%s", code, body)
	}
	got := decode(t, body)
	if id, _ := got["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id = %v, want chatcmpl-...", got["id"])
	}
	if c, _ := got["created"].(float64); c == 0 {
		t.Errorf("created = %v, want set", got["created"])
	}
	delete(got, "id")
	delete(got, "created")
	want := map[string]any{
		"object": "chat.completion",
		"model":  "m",
		"choices": []any{map[string]any{
			"index": 0.0, "message": map[string]any{"role": "assistant", "content": "hello world"}, "logprobs": nil, "finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 0.0, "completion_tokens": 2.0, "total_tokens": 2.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	sent := proto.Clone(a.lastRequest()).(*workerv1.GenerateRequest)
	sent.RequestId = ""
	wantReq := &workerv1.GenerateRequest{
		Model: "m",
		Prompt: &workerv1.GenerateRequest_Messages{Messages: &workerv1.Messages{Messages: []*workerv1.Message{
			{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi\nthere"}, {Role: "assistant"}, {Role: "user", Content: "again"},
		}}},
		Sampling: &workerv1.Sampling{Temperature: proto.Float32(0.5), TopP: proto.Float32(0.9), Seed: proto.Int64(7)},
		// max_completion_tokens wins over the deprecated max_tokens.
		Stopping: &workerv1.Stopping{MaxTokens: 7, Stop: []string{"x", "y"}},
	}
	if diff := cmp.Diff(wantReq, sent, protocmp.Transform()); diff != "" {
		t.Errorf("request sent to the worker (-want +got):\n%s", diff)
	}

	// Without max tokens, the worker's default (the rest of the context).
	if code, _, body := r.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`); code != http.StatusOK {
		t.Fatalf("minimal request: %d %s", code, body)
	}
	if mt := a.lastRequest().GetStopping().GetMaxTokens(); mt != 0 {
		t.Errorf("max_tokens sent without one asked = %d, want 0 (the worker's default)", mt)
	}
}

func TestChatCompletionStream(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	for _, tc := range []struct {
		name      string
		options   string
		wantUsage bool
	}{
		{"without usage", ``, false},
		{"with usage", `,"stream_options":{"include_usage":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := r.do(t, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true`+tc.options+`}`)
			if code != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("got %d %s, want 200 text/event-stream:\n%s", code, hdr.Get("Content-Type"), body)
			}
			events := sseEvents(t, body)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("events = %q, want [DONE] last", events)
			}
			events = events[:len(events)-1]
			var deltas, reasons []any
			var ids []string
			for i, e := range events {
				m := decode(t, e)
				ids = append(ids, m["id"].(string))
				if m["object"] != "chat.completion.chunk" || m["model"] != "m" {
					t.Errorf("event %s: want object chat.completion.chunk, model m", e)
				}
				usage, has := m["usage"]
				if tc.wantUsage && i == len(events)-1 {
					if diff := cmp.Diff(map[string]any{"prompt_tokens": 0.0, "completion_tokens": 2.0, "total_tokens": 2.0}, usage); diff != "" {
						t.Errorf("usage of the last event (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff([]any{}, m["choices"]); diff != "" {
						t.Errorf("choices of the usage event (-want +got):\n%s", diff)
					}
					continue
				}
				if has != tc.wantUsage || usage != nil {
					t.Errorf("event %s: usage key present %v, want %v, and null", e, has, tc.wantUsage)
				}
				c := m["choices"].([]any)[0].(map[string]any)
				deltas = append(deltas, c["delta"])
				reasons = append(reasons, c["finish_reason"])
			}
			wantDeltas := []any{
				map[string]any{"role": "assistant", "content": ""},
				map[string]any{"content": "hello"},
				map[string]any{"content": " world"},
				map[string]any{},
			}
			if diff := cmp.Diff(wantDeltas, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]any{nil, nil, nil, "stop"}, reasons); diff != "" {
				t.Errorf("finish reasons (-want +got):\n%s", diff)
			}
			for _, id := range ids {
				if id != ids[0] || !strings.HasPrefix(id, "chatcmpl-") {
					t.Errorf("event ids %q, want one chatcmpl-... id", ids)
					break
				}
			}
		})
	}
}

// errorOf sends body to path and returns the status and OpenAI error.
func errorOf(t *testing.T, r *testRouter, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	code, hdr, resp := r.do(t, "POST", path, body)
	e, ok := decode(t, resp)["error"].(map[string]any)
	if !ok {
		t.Fatalf("%s %s: %d %s, want an error", path, body, code, resp)
	}
	return code, hdr, e
}

// Parameters vigil cannot honour get 400 naming them, unless they hold the
// neutral value clients send; so do fields OpenAI's API does not have.
func TestUnsupportedParameters(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	const completion, chat = `"prompt":"p"`, `"messages":[{"role":"user","content":"p"}]`
	for _, tc := range []struct {
		path, prompt, field, value string
		ok                         bool
	}{
		{endpointCompletions, completion, "logprobs", "5", false},
		{endpointCompletions, completion, "logprobs", "null", true},
		{endpointCompletions, completion, "echo", "true", true},
		{endpointCompletions, completion, "echo", "false", true},
		{endpointCompletions, completion, "best_of", "2", false},
		{endpointCompletions, completion, "best_of", "1", true},
		{endpointCompletions, completion, "suffix", `"x"`, false},
		{endpointCompletions, completion, "presence_penalty", "0.5", false},
		{endpointCompletions, completion, "presence_penalty", "0", true},
		{endpointCompletions, completion, "frequency_penalty", "1", false},
		{endpointCompletions, completion, "frequency_penalty", "0.0", true},
		{endpointCompletions, completion, "logit_bias", `{"50256":-100}`, false},
		{endpointCompletions, completion, "logit_bias", `{}`, true},
		{endpointCompletions, completion, "min_tokens", "3", true},
		{endpointCompletions, completion, "min_p", "0.1", true},
		{endpointCompletions, completion, "repetition_penalty", "1.2", false},
		{endpointCompletions, completion, "repetition_penalty", "1", true},
		{endpointCompletions, completion, "user", `"anyone"`, true},
		{endpointCompletions, completion, "messages", `[]`, false},
		{endpointCompletions, completion, "no_such_field", "1", false},
		{endpointChat, chat, "logprobs", "true", false},
		{endpointChat, chat, "logprobs", "false", true},
		{endpointChat, chat, "top_logprobs", "3", false},
		{endpointChat, chat, "top_logprobs", "0", true},
		{endpointChat, chat, "tools", `[{"type":"function","function":{"name":"f"}}]`, false}, // no worker lists tools
		{endpointChat, chat, "tools", `[]`, true},
		{endpointChat, chat, "tool_choice", `"auto"`, false}, // without tools
		{endpointChat, chat, "tool_choice", `"none"`, true},
		{endpointChat, chat, "parallel_tool_calls", `false`, true},
		{endpointChat, chat, "functions", `[{"name":"f"}]`, false},
		{endpointChat, chat, "functions", `[]`, true},
		{endpointChat, chat, "function_call", `"auto"`, false},
		{endpointChat, chat, "response_format", `{"type":"json_object"}`, false},
		{endpointChat, chat, "response_format", `{"type":"text"}`, true},
		{endpointChat, chat, "n", "2", false},
		{endpointChat, chat, "n", "1", true},
		{endpointChat, chat, "presence_penalty", "0.1", false},
		{endpointChat, chat, "echo", "false", false}, // not chat's
		{endpointChat, chat, "prompt", `"p"`, false},
		{endpointChat, chat, "stream_options", `{"include_usage":true}`, false}, // without stream
	} {
		body := `{"model":"m",` + tc.prompt + `,"` + tc.field + `":` + tc.value + `}`
		code, _, resp := r.do(t, "POST", tc.path, body)
		if tc.ok {
			if code != http.StatusOK {
				t.Errorf("%s %s: %d %s, want 200 (a neutral value)", tc.path, body, code, resp)
			}
			continue
		}
		e, _ := decode(t, resp)["error"].(map[string]any)
		if code != http.StatusBadRequest || e["param"] != tc.field || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), tc.field) {
			t.Errorf("%s %s: %d %s, want 400 invalid_request_error with param and message naming %s", tc.path, body, code, resp, tc.field)
		}
	}
}

// Chat goes only to workers with a chat template; bad messages get 400
// naming messages.
func TestChatErrors(t *testing.T) {
	t.Parallel()
	plain := startWorker(t, "p", "plain")
	withChat := chatWorker(t, "c", "chat")
	r := startRouter(t, []*fakeWorker{plain, withChat})
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no chat template", `{"model":"plain","messages":[{"role":"user","content":"hi"}]}`, "--chat-template"},
		{"no messages", `{"model":"chat"}`, "messages: required"},
		{"empty messages", `{"model":"chat","messages":[]}`, "messages: must not be empty"},
		{"no role", `{"model":"chat","messages":[{"content":"hi"}]}`, "messages[0].role"},
		{"image part", `{"model":"chat","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0]"},
		{"tool call", `{"model":"chat","messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]}]}`, "messages[0].tool_calls"},
		{"null user content", `{"model":"chat","messages":[{"role":"user","content":null}]}`, "messages[0].content"},
		{"not an array", `{"model":"chat","messages":"hi"}`, "messages: want an array"},
	} {
		code, _, e := errorOf(t, r, endpointChat, tc.body)
		if code != http.StatusBadRequest || e["param"] != "messages" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: %d %v, want 400 with param messages and a message containing %q", tc.name, code, e, tc.want)
		}
	}
	if plain.requests.Load() != 0 {
		t.Errorf("the worker without a chat template got %d requests, want none", plain.requests.Load())
	}
}

func TestModelByID(t *testing.T) {
	t.Parallel()
	a := startWorker(t, "a", "org/model")
	a.ep.MaxModelLen = 8192
	r := startRouter(t, []*fakeWorker{a})

	code, _, body := r.do(t, "GET", "/v1/models/org/model", "")
	got := decode(t, body)
	if c, _ := got["created"].(float64); code != http.StatusOK || c == 0 {
		t.Fatalf("GET /v1/models/org/model: %d %s, want 200 with created set", code, body)
	}
	delete(got, "created")
	if diff := cmp.Diff(map[string]any{"id": "org/model", "object": "model", "owned_by": "vigil", "max_model_len": 8192.0}, got); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}

	// An id that is a path, as TensorRT-LLM's model ids often are, raw or
	// escaped as clients send it.
	b := startWorker(t, "b", "/models/llama")
	r.pool.Update(endpoints(a, b))
	for _, path := range []string{"/v1/models//models/llama", "/v1/models/%2Fmodels%2Fllama"} {
		code, _, body := r.do(t, "GET", path, "")
		if id := decode(t, body)["id"]; code != http.StatusOK || id != "/models/llama" {
			t.Errorf("GET %s: %d %s, want 200 with id /models/llama", path, code, body)
		}
	}

	code, _, body = r.do(t, "GET", "/v1/models/nope", "")
	want := map[string]any{"error": map[string]any{"message": "The model `nope` does not exist.", "type": "invalid_request_error",
		"param": "model", "code": "model_not_found"}}
	if diff := cmp.Diff(want, decode(t, body)); code != http.StatusNotFound || diff != "" {
		t.Errorf("unknown model: %d, want 404; body (-want +got):\n%s", code, diff)
	}
}

// contextError is a worker's INVALID_ARGUMENT for a request over the
// model's length, as endpoint sends it.
func contextError(t *testing.T, field string, maxLen, prompt, maxTokens string) error {
	st, err := status.New(codes.InvalidArgument, field+": over the model's maximum length").WithDetails(&errdetails.ErrorInfo{
		Reason: workerapi.ReasonContextLength, Domain: workerapi.ErrorDomain,
		Metadata: map[string]string{workerapi.MetaMaxModelLen: maxLen, workerapi.MetaPromptTokens: prompt, workerapi.MetaMaxTokens: maxTokens},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// Worker errors reach clients in OpenAI's words and field names, with
// their true numbers, never the worker API's paths nor gRPC's transport
// text.
func TestWorkerErrorsInOpenAITerms(t *testing.T) {
	t.Parallel()
	w := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{w})
	for _, tc := range []struct {
		name, path, body string
		fail             error
		wantStatus       int
		wantParam        any
		wantCode         any
		wantMsg          string
	}{
		{"context with max_tokens", endpointCompletions, `{"prompt":[1],"max_tokens":1000}`, contextError(t, "stopping.max_tokens", "4096", "4000", "1000"),
			400, "max_tokens", "context_length_exceeded",
			"This model's maximum context length is 4096 tokens; the request asks for 5000 tokens (4000 in the prompt, 1000 for the completion)."},
		{"context with max_completion_tokens", endpointChat, `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":1000}`,
			contextError(t, "stopping.max_tokens", "4096", "4000", "1000"), 400, "max_completion_tokens", "context_length_exceeded",
			"This model's maximum context length is 4096 tokens; the request asks for 5000 tokens (4000 in the messages, 1000 for the completion)."},
		{"chat prompt too long", endpointChat, `{"messages":[{"role":"user","content":"x"}]}`, contextError(t, "prompt.messages", "4096", "5000", "0"),
			400, "messages", "context_length_exceeded",
			"This model's maximum context length is 4096 tokens; the request asks for at least 5001 tokens (5000 in the messages, at least 1 for the completion)."},
		{"proto path", endpointCompletions, `{"prompt":"x"}`, status.Error(codes.InvalidArgument, "sampling.top_p: 1.5: must be in (0, 1]"),
			400, "top_p", nil, "top_p: 1.5: must be in (0, 1]"},
		{"adapter class", endpointChat, `{"messages":[{"role":"user","content":"x"}],"seed":1}`, status.Error(codes.InvalidArgument, "invalid argument: seed: SGLang's API takes no sampling seed"),
			400, "seed", nil, "seed: SGLang's API takes no sampling seed"},
		{"transport text", endpointCompletions, `{"prompt":"x"}`,
			status.Error(codes.Internal, `engine request failed: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing"`),
			500, nil, nil, "the worker or its engine could not be reached; retry later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.set(func(w *fakeWorker) { w.fail = tc.fail })
			code, _, e := errorOf(t, r, tc.path, tc.body)
			if code != tc.wantStatus || e["param"] != tc.wantParam || e["code"] != tc.wantCode || e["message"] != tc.wantMsg {
				t.Errorf("got %d %v, want %d, param %v, code %v, message %q", code, e, tc.wantStatus, tc.wantParam, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// 429 and 503 carry Retry-After, which OpenAI's clients honour.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	busy := startWorker(t, "b", "busy")
	busy.set(func(w *fakeWorker) { w.refuse = codes.ResourceExhausted })
	r := startRouter(t, []*fakeWorker{busy})
	if code, hdr, _ := errorOf(t, r, endpointCompletions, `{"model":"busy","prompt":"p"}`); code != 429 || hdr.Get("Retry-After") != "1" {
		t.Errorf("all workers busy: %d Retry-After %q, want 429 and Retry-After 1", code, hdr.Get("Retry-After"))
	}
	empty := startRouter(t, nil)
	if code, hdr, _ := errorOf(t, empty, endpointChat, `{"messages":[{"role":"user","content":"p"}]}`); code != 503 || hdr.Get("Retry-After") != "5" {
		t.Errorf("no workers: %d Retry-After %q, want 503 and Retry-After 5", code, hdr.Get("Retry-After"))
	}
}

// syncBuffer is a log sink safe for the router's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A client that goes away mid-request is logged at info as a cancel: no
// warning, no error.
func TestClientCancelLoggedAtInfo(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		a := startWorker(t, "a", "m")
		a.set(func(w *fakeWorker) { w.hold = true })
		var logs syncBuffer
		log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})
		r := startRouter(t, []*fakeWorker{a}, func(p *ProxyConfig, h *HTTPConfig) { p.Logger, h.Logger = log, log })

		ctx, cancel := context.WithCancel(t.Context())
		body := `{"model":"m","prompt":"p","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		req, _ := http.NewRequestWithContext(ctx, "POST", r.http.URL+endpointCompletions, strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := r.http.Client().Do(req); err == nil {
				bufio.NewReader(resp.Body).ReadString(0)
				resp.Body.Close()
			}
		}()
		<-a.holding
		cancel()
		<-a.cancelled
		<-done
		// The handler logs once the proxy returns; wait for its line.
		waitFor(t, func() bool { return strings.Contains(logs.String(), "request cancelled by the client") })
		out := logs.String()
		if !strings.Contains(out, "[INFO]  request cancelled by the client") || strings.Contains(out, "[WARN]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("stream=%v: log:\n%s\nwant the cancel at info, nothing at warn or error", stream, out)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Among a model's workers, chat goes only to those with a chat template,
// text and token ids to any.
func TestChatPicksChatWorkers(t *testing.T) {
	t.Parallel()
	plain, withChat := startWorker(t, "p", "m"), chatWorker(t, "c", "m")
	r := startRouter(t, []*fakeWorker{plain, withChat})
	for range 6 {
		if code, _, body := r.do(t, "POST", endpointChat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); code != http.StatusOK {
			t.Fatalf("chat: %d %s", code, body)
		}
	}
	if plain.requests.Load() != 0 || withChat.requests.Load() != 6 {
		t.Errorf("chat requests: %s, want all 6 on c", counts(plain, withChat))
	}
	for range 4 {
		if code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"hi"}`); code != http.StatusOK {
			t.Fatalf("completion: %d %s", code, body)
		}
	}
	if plain.requests.Load() == 0 {
		t.Errorf("completions: %s, want p used too", counts(plain, withChat))
	}
}

// min_tokens (vLLM's extension) and min_p reach the worker from both
// endpoints; values no engine takes get 400 naming them.
func TestMinTokensAndMinP(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	const completion, chat = `"prompt":"p"`, `"messages":[{"role":"user","content":"p"}]`
	for _, path := range []string{endpointCompletions, endpointChat} {
		prompt := completion
		if path == endpointChat {
			prompt = chat
		}
		body := `{"model":"m",` + prompt + `,"max_tokens":8,"min_tokens":8,"min_p":0.25}`
		if code, _, resp := r.do(t, "POST", path, body); code != http.StatusOK {
			t.Fatalf("%s %s: %d %s, want 200", path, body, code, resp)
		}
		sent := a.lastRequest()
		if got := sent.GetStopping().GetMinTokens(); got != 8 {
			t.Errorf("%s: worker's stopping.min_tokens = %d, want 8", path, got)
		}
		if got := sent.GetSampling().GetMinP(); got != 0.25 {
			t.Errorf("%s: worker's sampling.min_p = %v, want 0.25", path, got)
		}
	}
	for _, tc := range []struct {
		path, body, param, msg string
	}{
		{endpointCompletions, `"min_tokens":-1`, "min_tokens", "from 0 to"},
		{endpointCompletions, `"min_tokens":1.5`, "min_tokens", "want an integer"},
		{endpointCompletions, `"min_tokens":"3"`, "min_tokens", "want an integer"},
		{endpointCompletions, `"max_tokens":4,"min_tokens":5`, "min_tokens", "5 exceeds max_tokens 4"},
		{endpointCompletions, `"min_tokens":17`, "min_tokens", "exceeds max_tokens 16"}, // the default
		{endpointChat, `"max_completion_tokens":4,"min_tokens":5`, "min_tokens", "5 exceeds max_completion_tokens 4"},
		{endpointCompletions, `"min_p":1.5`, "min_p", "from 0 to 1"},
		{endpointChat, `"min_p":-0.1`, "min_p", "from 0 to 1"},
		{endpointChat, `"min_p":"x"`, "min_p", "want a number"},
	} {
		prompt := completion
		if tc.path == endpointChat {
			prompt = chat
		}
		code, _, e := errorOf(t, r, tc.path, `{"model":"m",`+prompt+`,`+tc.body+`}`)
		if msg, _ := e["message"].(string); code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s %s: %d %v, want 400 with param %s and a message containing %q", tc.path, tc.body, code, e, tc.param, tc.msg)
		}
	}
}
