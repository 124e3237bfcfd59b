package router

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// allCaps is a worker that takes every parameter of this release.
const allCaps = "chat_template_kwargs,choice,frequency_penalty,grammar.ebnf,grammar.lark,ignore_eos,json_object,json_schema," +
	"logit_bias,min_p,min_tokens,n=8,presence_penalty,prompt_token_ids,reasoning,regex,repetition_penalty,seed,stop,structural_tag,tokenize,tools,top_k"

// capsWorker is a chat worker that publishes caps (its discovery
// metadata's "caps").
func capsWorker(t *testing.T, id, model, caps string) *fakeWorker {
	w := chatWorker(t, id, model)
	w.ep.Caps = discovery.ParseCapabilities(caps)
	return w
}

const userHi = `"messages":[{"role":"user","content":"hi"}]`

// The requests of issue 25's "Why", as the openai, AI SDK and LangChain
// packages send them: each got 400 before (the router refused the field
// or its shape), each is answered now by a worker that takes it.
func TestClientRequestsAnswered(t *testing.T) {
	t.Parallel()
	r := startRouter(t, []*fakeWorker{capsWorker(t, "a", "m", allCaps)})
	for _, tc := range []struct{ name, path, body string }{
		{"json_object", endpointChat, `{"model":"m",` + userHi + `,"response_format":{"type":"json_object"}}`},
		{"json_schema (parse helper)", endpointChat, `{"model":"m",` + userHi + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},"strict":true}}}`},
		{"n: 2", endpointChat, `{"model":"m",` + userHi + `,"n":2}`},
		{"penalties", endpointChat, `{"model":"m",` + userHi + `,"presence_penalty":0.5,"frequency_penalty":-0.5}`},
		{"logit_bias", endpointCompletions, `{"model":"m","prompt":"p","logit_bias":{"50256":-100}}`},
		{"LangChain's prompt list", endpointCompletions, `{"model":"m","prompt":["p"]}`},
		{"name (group chats)", endpointChat, `{"model":"m","messages":[{"role":"user","name":"alice","content":"hi"}]}`},
		{"replayed annotations", endpointChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo","annotations":[],"refusal":null},{"role":"user","content":"again"}]}`},
		{"replayed parsed", endpointChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{}","parsed":null},{"role":"user","content":"again"}]}`},
		{"developer", endpointChat, `{"model":"m","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}]}`},
		{"chat_template_kwargs", endpointChat, `{"model":"m",` + userHi + `,"chat_template_kwargs":{"enable_thinking":false}}`},
		{"prompt_cache_key, safety_identifier", endpointChat, `{"model":"m",` + userHi + `,"prompt_cache_key":"k","safety_identifier":"s"}`},
	} {
		if code, _, body := r.do(t, "POST", tc.path, tc.body); code != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", tc.name, code, body)
		}
	}
}

// lastMapped sends body and returns the request the worker got.
func lastMapped(t *testing.T, r *testRouter, w *fakeWorker, path, body string) *workerv1.GenerateRequest {
	t.Helper()
	if code, _, resp := r.do(t, "POST", path, body); code != http.StatusOK {
		t.Fatalf("%s: %d %s, want 200", body, code, resp)
	}
	return w.lastRequest()
}

func so(kind any) *workerv1.StructuredOutput {
	switch k := kind.(type) {
	case *workerv1.JsonSchema:
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: k}}
	case *workerv1.Grammar:
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Grammar{Grammar: k}}
	case []string:
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Choice{Choice: &workerv1.Choice{Choices: k}}}
	case string:
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_Regex{Regex: k}}
	}
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}
}

func TestStructuredOutputMapping(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	const ebnf = "root ::= \"yes\" | \"no\"  # GBNF"
	const lark = "// a Lark grammar\nstart: \"yes\" | \"no\""
	tag := &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_StructuralTag{StructuralTag: `{"type":"structural_tag"}`}}
	for _, tc := range []struct {
		path, field string
		want        *workerv1.StructuredOutput
	}{
		{endpointChat, `"response_format":{"type":"text"}`, nil},
		{endpointChat, `"response_format":{"type":"json_object"}`, so(nil)},
		{endpointCompletions, `"response_format":{"type":"json_schema","json_schema":{"name":"n","description":"d","strict":true,"schema":{ "type": "object" }}}`,
			so(&workerv1.JsonSchema{Name: "n", Strict: true, Schema: `{"type":"object"}`})},
		{endpointChat, `"guided_json":{"type":"object"}`, so(&workerv1.JsonSchema{Schema: `{"type":"object"}`})},
		{endpointCompletions, `"guided_json":"{\"type\": \"object\"}"`, so(&workerv1.JsonSchema{Schema: `{"type":"object"}`})},
		{endpointChat, `"guided_regex":"[a-z]+"`, so("[a-z]+")},
		{endpointChat, `"guided_choice":["yes","no"]`, so([]string{"yes", "no"})},
		{endpointCompletions, `"guided_grammar":` + jsonString(ebnf), so(&workerv1.Grammar{Dialect: "ebnf", Text: ebnf})},
		{endpointCompletions, `"guided_grammar":` + jsonString(lark), so(&workerv1.Grammar{Dialect: "lark", Text: lark})},
		{endpointChat, `"structured_outputs":{"json":{"type":"object"}}`, so(&workerv1.JsonSchema{Schema: `{"type":"object"}`})},
		{endpointChat, `"structured_outputs":{"regex":"x","json_object":false,"disable_any_whitespace":null}`, so("x")},
		{endpointChat, `"structured_outputs":{"choice":["a"]}`, so([]string{"a"})},
		{endpointChat, `"structured_outputs":{"grammar":` + jsonString(ebnf) + `}`, so(&workerv1.Grammar{Dialect: "ebnf", Text: ebnf})},
		{endpointChat, `"structured_outputs":{"json_object":true}`, so(nil)},
		{endpointChat, `"structured_outputs":{"structural_tag":{"type": "structural_tag"}}`, tag},
		{endpointChat, `"guided_json":null,"guided_decoding_backend":null,"guided_whitespace_pattern":null`, nil},
	} {
		prompt := `"prompt":"p"`
		if tc.path == endpointChat {
			prompt = userHi
		}
		got := lastMapped(t, r, a, tc.path, `{"model":"m",`+prompt+`,`+tc.field+`}`)
		if diff := cmp.Diff(tc.want, got.GetStructuredOutput(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: structured_output (-want +got):\n%s", tc.field, diff)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Bad shapes and a second constraint get 400 naming the field.
func TestStructuredOutputErrors(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	for _, tc := range []struct{ field, param, msg string }{
		{`"response_format":{"type":"json_object"},"guided_regex":"x"`, "guided_regex", "at most one"},
		{`"guided_json":{},"structured_outputs":{"regex":"x"}`, "structured_outputs", "structured_outputs.regex"},
		{`"structured_outputs":{"regex":"x","choice":["a"]}`, "structured_outputs", "structured_outputs.choice"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`, "response_format.json_schema.schema", "response_format.json_schema.schema"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}}`, "response_format.json_schema.schema", "object"},
		{`"response_format":{"type":"json_schema"}`, "response_format.json_schema", "required"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{},"strict":"yes"}}`, "response_format.json_schema.strict", "boolean"},
		{`"response_format":{"type":"json_schema","json_schema":{"schema":{},"extra":1}}`, "response_format.json_schema.extra", "not a field"},
		{`"response_format":{"type":"xml"}`, "response_format.type", "json_schema"},
		{`"response_format":"json"`, "response_format", "object"},
		{`"guided_json":"not json"`, "guided_json", "schema"},
		{`"guided_choice":[]`, "guided_choice", "non-empty"},
		{`"guided_regex":""`, "guided_regex", "non-empty"},
		{`"guided_grammar":5`, "guided_grammar", "string"},
		{`"structured_outputs":{"whitespace_pattern":"x"}`, "structured_outputs.whitespace_pattern", "null"},
		{`"guided_decoding_backend":"xgrammar"`, "guided_decoding_backend", "null"},
		{`"guided_whitespace_pattern":"\\s"`, "guided_whitespace_pattern", "null"},
	} {
		code, _, e := errorOf(t, r, endpointChat, `{"model":"m",`+userHi+`,`+tc.field+`}`)
		if code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.msg) {
			t.Errorf("%s: %d %v, want 400 with param %s and a message containing %q", tc.field, code, e, tc.param, tc.msg)
		}
	}
	if n := a.requests.Load(); n != 0 {
		t.Errorf("the worker got %d requests, want none", n)
	}
}

func TestGrammarDialect(t *testing.T) {
	for text, want := range map[string]string{
		`root ::= "a"`:                       "ebnf",
		"# comment ::= not a rule\nstart: x": "lark",
		"// x ::= y\nstart: \"a\"":           "lark",
		"start: x\nx ::= \"a\"":              "ebnf",
		"":                                   "lark",
	} {
		if got := grammarDialect(text); got != want {
			t.Errorf("grammarDialect(%q) = %s, want %s", text, got, want)
		}
	}
}

// Penalties and logit_bias reach the worker's Sampling; neutral values set
// nothing and need no capability, so a worker of v0.1.0 takes them.
func TestPenaltiesAndLogitBias(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	old := startWorker(t, "old", "legacy")
	r := startRouter(t, []*fakeWorker{a, old})
	got := lastMapped(t, r, a, endpointCompletions, `{"model":"m","prompt":"p","presence_penalty":0.5,"frequency_penalty":-2,"repetition_penalty":1.2,"logit_bias":{"7":-100,"50256":100}}`)
	want := &workerv1.Sampling{PresencePenalty: 0.5, FrequencyPenalty: -2, RepetitionPenalty: proto.Float32(1.2),
		LogitBias: map[uint32]float32{7: -100, 50256: 100}}
	if diff := cmp.Diff(want, got.GetSampling(), protocmp.Transform()); diff != "" {
		t.Errorf("sampling (-want +got):\n%s", diff)
	}
	got = lastMapped(t, r, old, endpointCompletions, `{"model":"legacy","prompt":"p","presence_penalty":0,"frequency_penalty":0.0,"repetition_penalty":1,"logit_bias":{}}`)
	if diff := cmp.Diff(&workerv1.Sampling{}, got.GetSampling(), protocmp.Transform()); diff != "" {
		t.Errorf("neutral values: sampling (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ field, param string }{
		{`"presence_penalty":2.5`, "presence_penalty"},
		{`"frequency_penalty":-3`, "frequency_penalty"},
		{`"repetition_penalty":0`, "repetition_penalty"},
		{`"repetition_penalty":-1`, "repetition_penalty"},
		{`"logit_bias":{"x":1}`, "logit_bias"},
		{`"logit_bias":{"-1":1}`, "logit_bias"},
		{`"logit_bias":{"1":101}`, "logit_bias"},
		{`"logit_bias":{"1":"a"}`, "logit_bias"},
		{`"logit_bias":[1]`, "logit_bias"},
		{`"presence_penalty":0.1`, "presence_penalty"}, // the legacy worker
	} {
		model := "m"
		if strings.HasSuffix(tc.field, "0.1") {
			model = "legacy"
		}
		code, _, e := errorOf(t, r, endpointCompletions, `{"model":"`+model+`","prompt":"p",`+tc.field+`}`)
		if code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.param) {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.field, code, e, tc.param)
		}
	}
}

// A model served by mixed workers answers alike whichever worker a
// request would have gone to: requests go only to workers that take
// everything they ask; when none does, 400 names the first parameter in
// parameter order that some worker lacks.
func TestCapabilityMatching(t *testing.T) {
	t.Parallel()
	schema := capsWorker(t, "schema", "m", "json_schema,stop")
	bias := capsWorker(t, "bias", "m", "logit_bias,stop")
	old := startWorker(t, "old", "m") // no caps: v0.1.0's fields
	old.ep.Chat = true
	r := startRouter(t, []*fakeWorker{schema, bias, old})
	const rf = `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}`
	for range 6 {
		if code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,`+rf+`}`); code != http.StatusOK {
			t.Fatalf("json_schema: %d %s", code, body)
		}
		if code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":"p","logit_bias":{"1":1}}`); code != http.StatusOK {
			t.Fatalf("logit_bias: %d %s", code, body)
		}
	}
	if got := counts(schema, bias, old); got != "schema=6 bias=6 old=0" {
		t.Errorf("requests per worker: %s, want schema=6 bias=6 old=0", got)
	}
	for _, tc := range []struct{ body, param string }{
		{`"logit_bias":{"1":1},` + rf, "response_format"},
		{rf + `,"logit_bias":{"1":1}`, "response_format"},
		{`"n":2`, "n"},
		{`"seed":1,"presence_penalty":1`, "presence_penalty"},
		{`"chat_template_kwargs":{"enable_thinking":false}`, "chat_template_kwargs"},
	} {
		for range 3 { // any worker it could have picked
			code, _, e := errorOf(t, r, endpointChat, `{"model":"m",`+userHi+`,`+tc.body+`}`)
			if code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(e["message"].(string), "no worker of model") {
				t.Errorf("%s: %d %v, want 400 naming %s: no worker of model takes it", tc.body, code, e, tc.param)
			}
		}
	}
	// gRPC clients get the worker API's field.
	stream, err := r.client.Generate(t.Context(), &workerv1.GenerateRequest{Model: "m", Prompt: &workerv1.GenerateRequest_Text{Text: "p"}, N: 3})
	if err == nil {
		_, err = stream.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "n: ") {
		t.Errorf("gRPC n=3: %v, want INVALID_ARGUMENT naming n", err)
	}
}

// Retries go only to workers that take the request.
func TestRetriesAmongCandidatesOnly(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", "json_object")
	a.set(func(w *fakeWorker) { w.refuse = codes.Unavailable })
	b := chatWorker(t, "b", "m")
	r := startRouter(t, []*fakeWorker{a, b})
	code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"response_format":{"type":"json_object"}}`)
	if code != http.StatusServiceUnavailable {
		t.Errorf("got %d %s, want 503 (the only worker that takes it is unavailable)", code, body)
	}
	if b.requests.Load() != 0 {
		t.Errorf("the worker without json_object got %d requests, want none", b.requests.Load())
	}
}

func TestCapSetMatchesMissing(t *testing.T) {
	needs := []discovery.Need{{Name: "stop"}, {Name: "n", AtLeast: 4}, {Name: "json_schema"}, {Name: "logprobs", AtLeast: 5}}
	for _, enc := range []string{"", "none", "stop", "n=2,stop", "n=4,stop", "json_schema,n,stop", "json_schema,logprobs=5,n=0,stop", "json_schema,logprobs=4,n=8,stop"} {
		c := discovery.ParseCapabilities(enc)
		for k := range len(needs) + 1 {
			want, wantMissing := c.Missing(needs[:k]...)
			i := newCapSet(c).missing(needs[:k])
			if (i >= 0) != wantMissing || (i >= 0 && needs[i] != want) {
				t.Errorf("%q, needs %v: capSet says %d, Missing says %v %v", enc, needs[:k], i, want, wantMissing)
			}
		}
	}
}

func TestNChoices(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	a.set(func(w *fakeWorker) { w.cached = 3 })
	r := startRouter(t, []*fakeWorker{a})
	code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"n":3}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if n := a.lastRequest().GetN(); n != 3 {
		t.Errorf("worker got n = %d, want 3", n)
	}
	got := decode(t, body)
	var want []any
	for j, reason := range []string{"stop", "length", "stop"} {
		want = append(want, map[string]any{"index": float64(j), "logprobs": nil, "finish_reason": reason,
			"message": map[string]any{"role": "assistant", "content": "hello world " + string(rune('0'+j))}})
	}
	if diff := cmp.Diff(want, got["choices"]); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	wantUsage := map[string]any{"prompt_tokens": 0.0, "completion_tokens": 6.0, "total_tokens": 6.0, "prompt_tokens_details": map[string]any{"cached_tokens": 3.0}}
	if diff := cmp.Diff(wantUsage, got["usage"]); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// A stream of n choices: each choice's role first, chunks with their
// index, each choice's finish reason.
func TestNChoicesStream(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"n":2,"stream":true}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var got []string
	for _, e := range sseEvents(t, body) {
		if e == "[DONE]" {
			got = append(got, e)
			continue
		}
		c := decode(t, e)["choices"].([]any)[0].(map[string]any)
		d, _ := json.Marshal(c["delta"])
		got = append(got, strings.Join([]string{jsonNum(c["index"]), string(d), jsonNum(c["finish_reason"])}, " "))
	}
	want := []string{
		`0 {"content":"","role":"assistant"} null`, `1 {"content":"","role":"assistant"} null`,
		`0 {"content":"hello"} null`, `1 {"content":"hello"} null`,
		`0 {"content":" world 0"} null`, `1 {"content":" world 1"} null`,
		`0 {} "stop"`, `1 {} "length"`, "[DONE]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// jsonNum is v as JSON.
func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A completions prompt list is a batch: one worker request per prompt,
// choices numbered prompt i, choice j at i*n+j, usage summed.
func TestPromptBatch(t *testing.T) {
	t.Parallel()
	a, b := capsWorker(t, "a", "m", allCaps), capsWorker(t, "b", "m", allCaps)
	for _, w := range []*fakeWorker{a, b} {
		w.set(func(w *fakeWorker) { w.tagPrompt = true })
	}
	r := startRouter(t, []*fakeWorker{a, b})
	code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":["x y","z"],"max_tokens":5}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	got := decode(t, body)
	want := []any{
		map[string]any{"index": 0.0, "text": "[x y]hello world", "logprobs": nil, "finish_reason": "stop"},
		map[string]any{"index": 1.0, "text": "[z]hello world", "logprobs": nil, "finish_reason": "stop"},
	}
	if diff := cmp.Diff(want, got["choices"]); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"prompt_tokens": 3.0, "completion_tokens": 4.0, "total_tokens": 7.0}, got["usage"]); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got := counts(a, b); got != "a=1 b=1" {
		t.Errorf("requests per worker: %s, want one prompt each (round-robin)", got)
	}

	// With n: prompt i, choice j is index i*n+j.
	code, _, body = r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":[[1,2],[3]],"n":2}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var texts []string
	for _, c := range decode(t, body)["choices"].([]any) {
		c := c.(map[string]any)
		texts = append(texts, jsonNum(c["index"])+":"+c["text"].(string)+":"+c["finish_reason"].(string))
	}
	if diff := cmp.Diff([]string{"0:hello world 0:stop", "1:hello world 1:length", "2:hello world 0:stop", "3:hello world 1:length"}, texts); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	// A list of integers stays one prompt of token ids.
	before := a.requests.Load() + b.requests.Load()
	lastMapped(t, r, a, endpointCompletions, `{"model":"m","prompt":[1,2,3]}`)
	if after := a.requests.Load() + b.requests.Load(); after != before+1 {
		t.Errorf("[1,2,3] made %d worker requests, want 1", after-before)
	}
}

// A streamed batch carries each choice's index; the usage is summed.
func TestPromptBatchStream(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	a.set(func(w *fakeWorker) { w.tagPrompt = true })
	r := startRouter(t, []*fakeWorker{a})
	code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":["x","y"],"stream":true,"stream_options":{"include_usage":true}}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	texts := map[float64]string{}
	var usage any
	for _, e := range sseEvents(t, body) {
		if e == "[DONE]" {
			continue
		}
		ev := decode(t, e)
		if u := ev["usage"]; u != nil {
			usage = u
		}
		for _, c := range ev["choices"].([]any) {
			c := c.(map[string]any)
			texts[c["index"].(float64)] += c["text"].(string)
		}
	}
	if diff := cmp.Diff(map[float64]string{0: "[x]hello world", 1: "[y]hello world"}, texts); diff != "" {
		t.Errorf("text per index (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"prompt_tokens": 2.0, "completion_tokens": 4.0, "total_tokens": 6.0}, usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// echo puts the prompt in front of each choice: the text prompt as sent,
// a token-id prompt as the worker decodes it (return_prompt, which needs
// a worker with a tokenizer).
func TestEcho(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	noTok := capsWorker(t, "b", "plain", "stop")
	r := startRouter(t, []*fakeWorker{a, noTok})
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","prompt":"Say","echo":true}`, "Sayhello world"},
		{`{"model":"m","prompt":[5,6],"echo":true}`, "<2 ids>hello world"},
		{`{"model":"m","prompt":"Say","echo":true,"stream":true}`, "Sayhello world"},
		{`{"model":"m","prompt":[5,6],"echo":true,"stream":true}`, "<2 ids>hello world"},
	} {
		code, _, body := r.do(t, "POST", endpointCompletions, tc.body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.body, code, body)
		}
		var text string
		if strings.Contains(tc.body, "stream") {
			events := sseEvents(t, body)
			first := decode(t, events[0])["choices"].([]any)[0].(map[string]any)["text"]
			if want := tc.want[:strings.Index(tc.want, "hello")]; first != want {
				t.Errorf("%s: first event's text %q, want the prompt %q", tc.body, first, want)
			}
			for _, e := range events[:len(events)-1] {
				text += decode(t, e)["choices"].([]any)[0].(map[string]any)["text"].(string)
			}
		} else {
			text = decode(t, body)["choices"].([]any)[0].(map[string]any)["text"].(string)
		}
		if text != tc.want {
			t.Errorf("%s: text %q, want %q", tc.body, text, tc.want)
		}
		if ids := strings.Contains(tc.body, "[5,6]"); a.lastRequest().GetReturnPrompt() != ids {
			t.Errorf("%s: return_prompt = %v, want %v", tc.body, !ids, ids)
		}
	}
	code, _, e := errorOf(t, r, endpointCompletions, `{"model":"plain","prompt":[5],"echo":true}`)
	if code != http.StatusBadRequest || e["param"] != "echo" {
		t.Errorf("echo of token ids without a tokenizer: %d %v, want 400 naming echo", code, e)
	}
}

// Messages as clients replay them.
func TestReplayedMessages(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	got := lastMapped(t, r, a, endpointChat, `{"model":"m","messages":[
		{"role":"developer","content":"Be brief."},
		{"role":"user","name":"alice","content":"hi"},
		{"role":"assistant","content":"yo","annotations":[],"refusal":null,"audio":null,"parsed":null,"reasoning_content":"thought","function_call":null,"tool_calls":[]},
		{"role":"assistant","content":null,"tool_calls":null,"refusal":"no"},
		{"role":"user","content":"again","name":null}]}`)
	want := &workerv1.Messages{Messages: []*workerv1.Message{
		{Role: "developer", Content: "Be brief."}, {Role: "user", Name: "alice", Content: "hi"},
		{Role: "assistant", Content: "yo", ReasoningContent: "thought"}, {Role: "assistant"}, {Role: "user", Content: "again"},
	}}
	if diff := cmp.Diff(want, got.GetMessages(), protocmp.Transform()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ msg, want string }{
		{`{"role":"assistant","content":"x","function_call":{"name":"f"}}`, "messages[0].function_call: the deprecated function calling; send tool_calls"},
		{`{"role":"user","content":"x","annotations":[]}`, "only an assistant message"},
		{`{"role":"user","content":"x","name":5}`, "messages[0].name: want a string"},
		{`{"role":"user","content":"x","colour":"red"}`, "unrecognized field colour"},
	} {
		code, _, e := errorOf(t, r, endpointChat, `{"model":"m","messages":[`+tc.msg+`]}`)
		if code != http.StatusBadRequest || e["param"] != "messages" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: %d %v, want 400 naming messages: %q", tc.msg, code, e, tc.want)
		}
	}
}

func TestChatTemplateKwargs(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	got := lastMapped(t, r, a, endpointChat, `{"model":"m",`+userHi+`,"chat_template_kwargs":{"enable_thinking": false}}`)
	if k := got.GetMessages().GetChatTemplateKwargs(); k != `{"enable_thinking":false}` {
		t.Errorf("chat_template_kwargs = %q, want {\"enable_thinking\":false}", k)
	}
	if k := lastMapped(t, r, a, endpointChat, `{"model":"m",`+userHi+`,"chat_template_kwargs":{}}`).GetMessages().GetChatTemplateKwargs(); k != "" {
		t.Errorf("{}: chat_template_kwargs = %q, want none", k)
	}
	for _, key := range []string{"messages", "tools", "add_generation_prompt", "bos_token", "documents"} {
		code, _, e := errorOf(t, r, endpointChat, `{"model":"m",`+userHi+`,"chat_template_kwargs":{"x":1,"`+key+`":[]}}`)
		if code != http.StatusBadRequest || e["param"] != "chat_template_kwargs."+key {
			t.Errorf("%s: %d %v, want 400 naming chat_template_kwargs.%s", key, code, e, key)
		}
	}
	code, _, e := errorOf(t, r, endpointChat, `{"model":"m",`+userHi+`,"chat_template_kwargs":[1]}`)
	if code != http.StatusBadRequest || e["param"] != "chat_template_kwargs" {
		t.Errorf("an array: %d %v, want 400 naming chat_template_kwargs", code, e)
	}
}

// Fields that stop at the router: prompt_cache_key is kept in the worker
// request (for placement), the others accepted; store takes any boolean
// on both endpoints.
func TestFieldsThatStopAtTheRouter(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	old := startWorker(t, "old", "legacy")
	r := startRouter(t, []*fakeWorker{a, old})
	got := lastMapped(t, r, a, endpointChat, `{"model":"m",`+userHi+`,"prompt_cache_key":"conv-1","safety_identifier":"u1","user":"u","metadata":{"k":"v"},"store":true}`)
	if got.GetPromptCacheKey() != "conv-1" {
		t.Errorf("prompt_cache_key = %q, want conv-1", got.GetPromptCacheKey())
	}
	for _, store := range []string{"true", "false", "null"} {
		lastMapped(t, r, old, endpointCompletions, `{"model":"legacy","prompt":"p","store":`+store+`,"prompt_cache_key":"k","safety_identifier":"s","metadata":{}}`)
	}
	code, _, e := errorOf(t, r, endpointCompletions, `{"model":"legacy","prompt":"p","store":"yes"}`)
	if code != http.StatusBadRequest || e["param"] != "store" {
		t.Errorf("store \"yes\": %d %v, want 400 naming store", code, e)
	}
}

// The needs of a gRPC request are its fields' capabilities, in parameter
// order.
func TestNeedsOf(t *testing.T) {
	req := &workerv1.GenerateRequest{
		StructuredOutput: so(&workerv1.Grammar{Dialect: "lark", Text: "start: x"}), N: 4, ReturnPrompt: true,
		Prompt:   &workerv1.GenerateRequest_Messages{Messages: &workerv1.Messages{ChatTemplateKwargs: "{}", Tools: "[]"}},
		Sampling: &workerv1.Sampling{PresencePenalty: 1, FrequencyPenalty: 1, RepetitionPenalty: proto.Float32(1.1), LogitBias: map[uint32]float32{1: 1}, TopK: proto.Uint32(5), MinP: 0.1, Seed: proto.Int64(1)},
		Stopping: &workerv1.Stopping{Stop: []string{"x"}, MinTokens: 1, IgnoreEos: true},
	}
	var got []string
	for _, n := range needsOf(req) {
		got = append(got, n.Name)
	}
	want := []string{"grammar.lark", "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "stop",
		"top_k", "min_p", "seed", "min_tokens", "ignore_eos", "chat_template_kwargs", "tools", "prompt_token_ids"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("needs (-want +got):\n%s", diff)
	}
	if n := needsOf(&workerv1.GenerateRequest{Sampling: &workerv1.Sampling{RepetitionPenalty: proto.Float32(1), TopK: proto.Uint32(0)}, N: 1}); n != nil {
		t.Errorf("neutral values: needs %v, want none", n)
	}
}

// A batch fails as a whole, with the error of the prompt that failed (not
// the cancel of the others), whole or streamed; and holds at most
// maxPrompts prompts.
func TestPromptBatchFailsAsAWhole(t *testing.T) {
	t.Parallel()
	a, b := capsWorker(t, "a", "m", allCaps), capsWorker(t, "b", "m", allCaps)
	b.set(func(w *fakeWorker) { w.breakAfterChunk = true })
	r := startRouter(t, []*fakeWorker{a, b})
	code, _, e := errorOf(t, r, endpointCompletions, `{"model":"m","prompt":["x","y","z"]}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(e["message"].(string), "engine lost") {
		t.Errorf("whole: %d %v, want 503 engine lost", code, e)
	}
	code, _, body := r.do(t, "POST", endpointCompletions, `{"model":"m","prompt":["x","y","z"],"stream":true}`)
	events := sseEvents(t, body)
	if last := events[len(events)-1]; code != http.StatusOK || !strings.Contains(last, "engine lost") || strings.Contains(body, "[DONE]") {
		t.Errorf("stream: %d, last event %s, want an error event saying engine lost and no [DONE]", code, last)
	}
	big := `{"model":"m","prompt":["a"` + strings.Repeat(`,"a"`, maxPrompts) + `]}`
	if code, _, e := errorOf(t, r, endpointCompletions, big); code != http.StatusBadRequest || e["param"] != "prompt" {
		t.Errorf("%d prompts: %d %v, want 400 naming prompt", maxPrompts+1, code, e)
	}
}

// BenchmarkPoolPickNeeds is BenchmarkPoolPick (peak-ewma) for requests
// with needs, half the workers of each model stating capabilities that
// meet them and half of v0.1.0.
func BenchmarkPoolPickNeeds(b *testing.B) {
	p := NewPool(PoolConfig{})
	defer p.Close()
	eps := fleet(250, "m0", "m1", "m2", "m3")
	for i := range eps {
		if i%2 == 0 {
			eps[i].Caps = discovery.ParseCapabilities(allCaps)
		}
	}
	p.Update(eps)
	needs := []discovery.Need{{Name: discovery.CapJSONSchema}, {Name: discovery.CapN, AtLeast: 2}, {Name: discovery.CapStop}}
	asks := []Ask{{Model: "m0", Needs: needs}, {Model: "m1", Needs: needs}, {Model: "m2", Needs: needs}, {Model: "m3", Needs: needs}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, _, rel, err := p.Pick(asks[i%4], nil)
			if err != nil {
				b.Fatal(err)
			}
			rel()
			i++
		}
	})
}
