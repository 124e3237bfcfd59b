package router

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

const lpCaps = allCaps + ",logprobs=20,prompt_logprobs=5"

// jsonOf is v as generic JSON, to compare with a decoded body.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// field is the JSON at path (keys and indexes) in body.
func field(t *testing.T, body string, path ...any) any {
	t.Helper()
	v := jsonOf(t, body)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// Chat's logprobs and top_logprobs (which got 400 before) reach the
// worker and come back in OpenAI's shape, whole and per stream event; a
// logprob the engine could not give shows as -9999.0.
func TestChatLogprobs(t *testing.T) {
	t.Parallel()
	w := capsWorker(t, "a", "m", lpCaps)
	r := startRouter(t, []*fakeWorker{w})
	got := lastMapped(t, r, w, endpointChat, `{"model":"m",`+userHi+`,"logprobs":true,"top_logprobs":1}`)
	if diff := cmp.Diff(&workerv1.Logprobs{Output: true, Top: 1}, got.GetLogprobs(), protocmp.Transform()); diff != "" {
		t.Errorf("worker's logprobs (-want +got):\n%s", diff)
	}
	_, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"logprobs":true,"top_logprobs":1}`)
	want := jsonOf(t, `{"content":[
		{"token":"hello","logprob":-0.5,"bytes":[104,101,108,108,111],"top_logprobs":[{"token":"hi","logprob":-0.25,"bytes":[104,105]}]},
		{"token":" world","logprob":-0.5,"bytes":[32,119,111,114,108,100],"top_logprobs":[{"token":"hi","logprob":-0.25,"bytes":[104,105]}]}],
		"refusal":null}`)
	if diff := cmp.Diff(want, field(t, body, "choices", 0, "logprobs")); diff != "" {
		t.Errorf("choices[0].logprobs (-want +got):\n%s", diff)
	}
	_, _, body = r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"logprobs":true,"stream":true}`)
	var lps []any
	for _, e := range sseEvents(t, body) {
		if e != "[DONE]" {
			lps = append(lps, field(t, e, "choices", 0, "logprobs"))
		}
	}
	want = jsonOf(t, `[null,
		{"content":[{"token":"hello","logprob":-0.5,"bytes":[104,101,108,108,111],"top_logprobs":[]}],"refusal":null},
		{"content":[{"token":" world","logprob":-0.5,"bytes":[32,119,111,114,108,100],"top_logprobs":[]}],"refusal":null},
		null]`)
	if diff := cmp.Diff(want, any(lps)); diff != "" {
		t.Errorf("events' logprobs (-want +got):\n%s", diff)
	}
	if lp := chatLogprobsOf(fakeLogprobs(true, "unknown", 0)); lp.Content[0].Logprob != -9999 {
		t.Errorf("unknown logprob in chat: %v, want -9999", lp.Content[0].Logprob)
	}
}

// Completions' logprobs: N (400 before) comes back as OpenAI's legacy
// object, whole and streamed; with echo the prompt's positions come
// first, the first with no logprob, as lm-eval-harness's loglikelihood
// requests (echo, logprobs 1, max_tokens 0: the prompt alone) read them.
func TestCompletionLogprobs(t *testing.T) {
	t.Parallel()
	w := capsWorker(t, "a", "m", lpCaps)
	r := startRouter(t, []*fakeWorker{w})
	_, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"p","logprobs":1}`)
	want := jsonOf(t, `{"tokens":["hello"," world"],"token_logprobs":[-0.5,-0.5],
		"top_logprobs":[{"hello":-0.5,"hi":-0.25},{" world":-0.5,"hi":-0.25}],"text_offset":[0,5]}`)
	if diff := cmp.Diff(want, field(t, body, "choices", 0, "logprobs")); diff != "" {
		t.Errorf("choices[0].logprobs (-want +got):\n%s", diff)
	}
	got := lastMapped(t, r, w, endpointCompletions, `{"model":"m","prompt":"A prompt","echo":true,"logprobs":1,"max_tokens":0}`)
	if diff := cmp.Diff(&workerv1.Logprobs{Output: true, Top: 1, Prompt: true, PromptTop: 1}, got.GetLogprobs(), protocmp.Transform()); diff != "" || got.GetStopping().GetMaxTokens() != 1 {
		t.Errorf("worker's logprobs (-want +got):\n%s\nmax_tokens %d, want 1", diff, got.GetStopping().GetMaxTokens())
	}
	_, _, body = r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"A prompt","echo":true,"logprobs":1,"max_tokens":0}`)
	want = jsonOf(t, `{"tokens":["A"," prompt"],"token_logprobs":[null,-1.5],"top_logprobs":[null,{" prompt":-1.5}],"text_offset":[0,1]}`)
	if diff := cmp.Diff(want, field(t, body, "choices", 0, "logprobs")); diff != "" || field(t, body, "choices", 0, "text") != "A prompt" {
		t.Errorf("echo with max_tokens 0: text %v, logprobs (-want +got):\n%s", field(t, body, "choices", 0, "text"), diff)
	}
	_, _, body = r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"A prompt","echo":true,"logprobs":0,"stream":true}`)
	var lps []any
	for _, e := range sseEvents(t, body) {
		if e != "[DONE]" {
			lps = append(lps, field(t, e, "choices", 0, "logprobs"))
		}
	}
	want = jsonOf(t, `[{"tokens":["A"," prompt"],"token_logprobs":[null,-1.5],"top_logprobs":[null,{" prompt":-1.5}],"text_offset":[0,1]},
		{"tokens":["hello"],"token_logprobs":[-0.5],"top_logprobs":[{"hello":-0.5}],"text_offset":[8]},
		{"tokens":[" world"],"token_logprobs":[-0.5],"top_logprobs":[{" world":-0.5}],"text_offset":[13]},
		null]`)
	if diff := cmp.Diff(want, any(lps)); diff != "" {
		t.Errorf("events' logprobs (-want +got):\n%s", diff)
	}
	c := newCompletionLogprobs()
	c.add(fakeLogprobs(true, "unknown", 0), new(0), false)
	if b, _ := json.Marshal(c); !strings.Contains(string(b), `"token_logprobs":[null]`) {
		t.Errorf("unknown logprob in completions: %s, want null", b)
	}
}

// Logprobs a request asks for that no worker gives, or in a shape OpenAI
// refuses, get 400 naming the parameter; no worker with logprobs names the
// tokenizer a worker needs.
func TestLogprobsRefused(t *testing.T) {
	t.Parallel()
	r := startRouter(t, []*fakeWorker{capsWorker(t, "a", "m", allCaps), capsWorker(t, "b", "small", allCaps+",logprobs=2")})
	for _, tc := range []struct{ name, path, body, param, msg string }{
		{"top_logprobs without logprobs", endpointChat, `{"model":"m",` + userHi + `,"top_logprobs":2}`, "top_logprobs", "logprobs must be true"},
		{"top_logprobs over 20", endpointChat, `{"model":"m",` + userHi + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs", "from 0 to 20"},
		{"logprobs not a boolean", endpointChat, `{"model":"m",` + userHi + `,"logprobs":3}`, "logprobs", "want a boolean"},
		{"no worker gives logprobs", endpointChat, `{"model":"m",` + userHi + `,"logprobs":true}`, "logprobs", "--tokenizer-dir"},
		{"fewer alternatives", endpointChat, `{"model":"small",` + userHi + `,"logprobs":true,"top_logprobs":5}`, "top_logprobs", "logprobs of 5 or more"},
		{"completions' logprobs over the workers'", endpointCompletions, `{"model":"small","prompt":"p","logprobs":3}`, "logprobs", "logprobs of 3 or more"},
		{"echo without prompt_logprobs", endpointCompletions, `{"model":"small","prompt":"p","logprobs":1,"echo":true}`, "logprobs", "prompt_logprobs"},
		{"completions' logprobs negative", endpointCompletions, `{"model":"m","prompt":"p","logprobs":-1}`, "logprobs", "want an integer"},
		{"max_tokens 0 without echo", endpointCompletions, `{"model":"m","prompt":"p","max_tokens":0}`, "max_tokens", "(or 0 with echo: the prompt alone)"},
	} {
		code, _, body := r.do(t, "POST", tc.path, tc.body)
		e, _ := decode(t, body)["error"].(map[string]any)
		if code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.msg) {
			t.Errorf("%s: %d %s, want 400 param %s, message containing %q", tc.name, code, body, tc.param, tc.msg)
		}
	}
}

// The Responses API's include message.output_text.logprobs, with
// top_logprobs alternatives (400 before), gives the output_text part's
// logprobs, chat's entries; streamed, each delta carries its tokens' and
// output_text.done all of them. top_logprobs alone asks for none, as
// OpenAI's.
func TestResponsesLogprobs(t *testing.T) {
	t.Parallel()
	w := capsWorker(t, "a", "m", lpCaps)
	r := startRouter(t, []*fakeWorker{w})
	const ask = `{"model":"m","input":"Hi","include":["message.output_text.logprobs"],"top_logprobs":1`
	got := lastMapped(t, r, w, endpointResponses, ask+`}`)
	if diff := cmp.Diff(&workerv1.Logprobs{Output: true, Top: 1}, got.GetLogprobs(), protocmp.Transform()); diff != "" {
		t.Errorf("worker's logprobs (-want +got):\n%s", diff)
	}
	want := jsonOf(t, `[
		{"token":"hello","logprob":-0.5,"bytes":[104,101,108,108,111],"top_logprobs":[{"token":"hi","logprob":-0.25,"bytes":[104,105]}]},
		{"token":" world","logprob":-0.5,"bytes":[32,119,111,114,108,100],"top_logprobs":[{"token":"hi","logprob":-0.25,"bytes":[104,105]}]}]`)
	_, _, body := r.do(t, "POST", endpointResponses, ask+`}`)
	if diff := cmp.Diff(want, field(t, body, "output", 0, "content", 0, "logprobs")); diff != "" || field(t, body, "top_logprobs") != 1.0 {
		t.Errorf("top_logprobs %v; output[0].content[0].logprobs (-want +got):\n%s", field(t, body, "top_logprobs"), diff)
	}
	_, _, body = r.do(t, "POST", endpointResponses, ask+`,"stream":true}`)
	lps := map[string][]any{}
	for _, e := range responseEvents(t, body) {
		switch e.name {
		case "response.output_text.delta", "response.output_text.done":
			lps[e.name] = append(lps[e.name], e.data["logprobs"])
		case "response.completed":
			lps[e.name] = append(lps[e.name], e.data["response"].(map[string]any)["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["logprobs"])
		}
	}
	whole := want.([]any)
	wantEvents := map[string][]any{"response.output_text.delta": {whole[:1], whole[1:]},
		"response.output_text.done": {want}, "response.completed": {want}}
	if diff := cmp.Diff(wantEvents, lps); diff != "" {
		t.Errorf("events' logprobs (-want +got):\n%s", diff)
	}
	if got := lastMapped(t, r, w, endpointResponses, `{"model":"m","input":"Hi","top_logprobs":3}`); got.GetLogprobs() != nil {
		t.Errorf("top_logprobs without include: worker's logprobs %v, want none", got.GetLogprobs())
	}
}
