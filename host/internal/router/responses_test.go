package router

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// issue 26: the AI SDK's default openai(model) posts to /v1/responses,
// which was 404. A Responses request is a chat completion of its input:
// the worker gets the messages (instructions first), the lengths,
// sampling and structured output; the answer is OpenAI's Response.
func TestResponses(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	start := time.Now().Unix()
	code, hdr, body := r.do(t, "POST", "/v1/responses", `{"model":"m","instructions":"Be brief.","input":"Hi",
		"max_output_tokens":7,"temperature":0.5,"top_p":0.9,"store":true,"metadata":{"a":"b"},"user":"u",
		"text":{"format":{"type":"json_schema","name":"p","schema":{"type":"object"},"strict":true},"verbosity":"medium"},
		"prompt_cache_key":"k","safety_identifier":"s","parallel_tool_calls":false,"truncation":"disabled",
		"tools":[],"tool_choice":"auto","include":[],"reasoning":{"effort":null},"service_tier":"auto","top_logprobs":0}`)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s, want 200 application/json:\n%s", code, hdr.Get("Content-Type"), body)
	}
	got := decode(t, body)
	id, _ := got["id"].(string)
	if !strings.HasPrefix(id, "resp_") || int64(got["created_at"].(float64)) < start || got["completed_at"] == nil {
		t.Errorf("id %v, created_at %v, completed_at %v: want resp_..., the request's time, its end", got["id"], got["created_at"], got["completed_at"])
	}
	out := got["output"].([]any)
	msgID, _ := out[0].(map[string]any)["id"].(string)
	if !strings.HasPrefix(msgID, "msg_") {
		t.Errorf("output[0].id = %q, want msg_...", msgID)
	}
	out[0].(map[string]any)["id"] = "MSG"
	for _, k := range []string{"id", "created_at", "completed_at"} {
		delete(got, k)
	}
	want := map[string]any{
		"object": "response", "status": "completed", "background": false, "error": nil, "incomplete_details": nil,
		"instructions": "Be brief.", "max_output_tokens": 7.0, "max_tool_calls": nil, "model": "m",
		"output": []any{map[string]any{"id": "MSG", "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "hello world", "annotations": []any{}, "logprobs": []any{}}}}},
		"parallel_tool_calls": false, "previous_response_id": nil, "prompt_cache_key": "k",
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "safety_identifier": "s", "service_tier": "default",
		"store": true, "temperature": 0.5, "top_p": 0.9, "tool_choice": "auto", "tools": []any{}, "top_logprobs": 0.0,
		"text":       map[string]any{"format": map[string]any{"type": "json_schema", "name": "p", "schema": map[string]any{"type": "object"}, "strict": true}, "verbosity": "medium"},
		"truncation": "disabled", "user": "u", "metadata": map[string]any{"a": "b"},
		"usage": map[string]any{"input_tokens": 0.0, "input_tokens_details": map[string]any{"cached_tokens": 0.0},
			"output_tokens": 2.0, "output_tokens_details": map[string]any{"reasoning_tokens": 0.0}, "total_tokens": 2.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	wantReq := &workerv1.GenerateRequest{
		RequestId: id, Model: "m", PromptCacheKey: "k",
		Prompt: &workerv1.GenerateRequest_Messages{Messages: &workerv1.Messages{Messages: []*workerv1.Message{
			{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}}},
		Sampling:         &workerv1.Sampling{Temperature: proto.Float32(0.5), TopP: proto.Float32(0.9)},
		Stopping:         &workerv1.Stopping{MaxTokens: 7},
		StructuredOutput: so(&workerv1.JsonSchema{Name: "p", Schema: `{"type":"object"}`, Strict: true}),
	}
	if diff := cmp.Diff(wantReq, a.lastRequest(), protocmp.Transform()); diff != "" {
		t.Errorf("request sent to the worker (-want +got):\n%s", diff)
	}
}

// The input's shapes, as the openai package and the AI SDK send them,
// become the chat messages of the same conversation.
func TestResponsesInput(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	got := lastMapped(t, r, a, endpointResponses, `{"model":"m","input":[
		{"role":"developer","content":"Be brief."},
		{"type":"message","role":"system","content":[{"type":"input_text","text":"Really."}]},
		{"role":"user","content":[{"type":"input_text","text":"Hi"},{"type":"input_text","text":"there"}]},
		{"id":"msg_1","type":"message","role":"assistant","status":"completed","phase":null,
		 "content":[{"type":"output_text","text":"Yo","annotations":[],"logprobs":[]},{"type":"refusal","refusal":"no"}]},
		{"role":"user","content":"again"}]}`)
	want := &workerv1.Messages{Messages: []*workerv1.Message{
		{Role: "developer", Content: "Be brief."}, {Role: "system", Content: "Really."}, {Role: "user", Content: "Hi\nthere"},
		{Role: "assistant", Content: "Yo"}, {Role: "user", Content: "again"},
	}}
	if diff := cmp.Diff(want, got.GetMessages(), protocmp.Transform()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		text string
		want *workerv1.StructuredOutput
	}{
		{`{"format":{"type":"json_object"}}`, so(true)},
		{`{"format":{"type":"text"}}`, nil},
		{`{"verbosity":"medium"}`, nil},
		{`{"format":{"type":"json_schema","name":"x","schema":{"type":"object"},"description":"d"}}`, so(&workerv1.JsonSchema{Name: "x", Schema: `{"type":"object"}`})},
	} {
		got := lastMapped(t, r, a, endpointResponses, `{"model":"m","input":"Hi","text":`+tc.text+`}`)
		if diff := cmp.Diff(tc.want, got.GetStructuredOutput(), protocmp.Transform()); diff != "" {
			t.Errorf("text %s: structured output (-want +got):\n%s", tc.text, diff)
		}
	}
}

// Every field and shape vigil cannot honour gets 400 naming it, in
// OpenAI's error shape, with what is allowed.
func TestResponsesErrors(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	for _, tc := range []struct{ body, param, want string }{
		{`"input":"Hi","colour":1`, "colour", "Unrecognized request argument supplied: colour"},
		{`"input":"Hi","previous_response_id":"resp_1"`, "previous_response_id", "vigil keeps no state"},
		{`"input":"Hi","conversation":"conv_1"`, "conversation", "send the whole conversation as input"},
		{`"input":"Hi","prompt":{"id":"pmpt_1"}`, "prompt", "no stored prompts"},
		{`"input":"Hi","tools":[{"type":"function","name":"f"}]`, "tools", "none lists the capability tools"},
		{`"input":"Hi","tools":[{"type":"web_search"}]`, "tools", `tools[0].type: vigil serves function tools only`},
		{`"input":"Hi","tools":[{"type":"function","name":"f"},{"type":"mcp","server_label":"x"}]`, "tools", `tools[1].type: vigil serves function tools only`},
		{`"input":"Hi","tools":[{"type":"function"}]`, "tools", `tools[0].name: want`},
		{`"input":"Hi","tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]`, "tools", `offered twice`},
		{`"input":"Hi","tools":[{"type":"function","name":"f","parameters":[]}]`, "tools", `tools[0].parameters: want a JSON Schema object`},
		{`"input":"Hi","tools":[{"type":"function","name":"f","defer_loading":true}]`, "tools", `tools[0].defer_loading: vigil cannot honour true`},
		{`"input":"Hi","tools":{}`, "tools", `want a list of function tools`},
		{`"input":"Hi","tool_choice":"required"`, "tool_choice", `"required" needs tools`},
		{`"input":"Hi","tool_choice":"sometimes"`, "tool_choice", `want "none", "auto", "required"`},
		{`"input":"Hi","tool_choice":{"type":"function","name":"g"},"tools":[{"type":"function","name":"f"}]`, "tool_choice", `"g" is not a function of tools`},
		{`"input":"Hi","tool_choice":{"type":"file_search"}`, "tool_choice", `vigil serves function tools only`},
		{`"input":"Hi","max_tool_calls":-1`, "max_tool_calls", `non-negative`},
		{`"input":[{"type":"function_call","call_id":"c","name":"f"}]`, "input[0].arguments", `want a string`},
		{`"input":[{"type":"function_call","name":"f","arguments":"{}"}]`, "input[0].call_id", `want a string`},
		{`"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","namespace":"n"}]`, "input", `input[0].namespace: not a field`},
		{`"input":[{"type":"function_call_output","output":"x"}]`, "input[0].call_id", `the id of the call`},
		{`"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]`, "input[0].output", `text parts only`},
		{`"input":[{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}]`, "input[0].encrypted_content", `only OpenAI reads`},
		{`"input":[{"type":"reasoning","summary":[{"type":"x","text":"t"}]}]`, "input", `input[0].summary[0]: want {"type": "summary_text"`},
		{`"input":"Hi","top_logprobs":21`, "top_logprobs", "from 0 to 20"},
		{`"input":"Hi","include":["reasoning.encrypted_content"]`, "include", `"message.output_text.logprobs" only`},
		{`"input":"Hi","include":"message.output_text.logprobs"`, "include", "a list of strings"},
		{`"input":"Hi","include":["message.output_text.logprobs"]`, "include", "--tokenizer-dir"},
		{`"input":"Hi","include":["message.output_text.logprobs"],"top_logprobs":2`, "top_logprobs", "--tokenizer-dir"},
		{`"input":"Hi","reasoning":{"effort":"low"}`, "reasoning", "no reasoning settings"},
		{`"input":"Hi","truncation":"auto"`, "truncation", `"disabled"`},
		{`"input":"Hi","service_tier":"flex"`, "service_tier", `"auto"`},
		{`"input":"Hi","background":true`, "background", "false"},
		{`"input":"Hi","text":{"verbosity":"low"}`, "text.verbosity", `"medium"`},
		{`"input":"Hi","text":{"format":{"type":"xml"}}`, "text.format.type", `"json_schema"`},
		{`"input":"Hi","text":{"format":{"type":"json_schema","name":"x"}}`, "text.format.schema", "required"},
		{`"input":"Hi","text":{"format":{"type":"json_object","schema":{}}}`, "text.format.schema", "not a field"},
		{`"input":"Hi","text":{"colour":1}`, "text.colour", "format, verbosity"},
		{`"input":"Hi","max_output_tokens":0`, "max_output_tokens", "from 1"},
		{`"input":"Hi","temperature":"hot"`, "temperature", "a number"},
		{`"input":"Hi","stream_options":{"include_obfuscation":false}`, "stream_options", "only allowed when stream is true"},
		{`"input":"Hi","stream":true,"stream_options":{"include_usage":true}`, "stream_options", "include_obfuscation"},
		{`"input":"Hi","metadata":[1]`, "metadata", "an object"},
		{`"instructions":"x"`, "input", "input: required"},
		{`"input":""`, "input", "non-empty"},
		{`"input":[]`, "input", "must not be empty"},
		{`"input":5`, "input", "a string or a list"},
		{`"input":[{"role":"tool","content":"x"}]`, "input", `input[0].role: want "user"`},
		{`"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]`, "input", `input[0].content[0]: vigil takes text parts only`},
		{`"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]`, "input", `got type "input_file"`},
		{`"input":[{"role":"user","content":[{"type":"refusal","refusal":"x"}]}]`, "input", `got type "refusal"`},
		{`"input":[{"type":"web_search_call","id":"ws_1","status":"completed"}]`, "input", "vigil takes message, function_call, function_call_output, reasoning and item_reference items"},
		{`"input":[{"role":"user","content":"x","name":"alice"}]`, "input", "unrecognized field name"},
		{`"input":[{"role":"user"}]`, "input", "input[0].content: want a string or a list of parts"},
		{`"input":[{"type":"item_reference","id":"msg_1"}]`, "input[0].id", "providerOptions.openai.store = false"},
		{`"input":[{"type":"item_reference"}]`, "input[0].id", "wants the id"},
		{`"input":[{"type":"item_reference","id":"msg_A","x":1}]`, "input", "not a field of an item_reference"},
	} {
		code, _, e := errorOf(t, r, endpointResponses, `{"model":"m",`+tc.body+`}`)
		if code != http.StatusBadRequest || e["param"] != tc.param || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: %d %v, want 400 naming %s: %q", tc.body, code, e, tc.param, tc.want)
		}
	}
	if code, _, e := errorOf(t, r, endpointResponses, `{"model":"m","input":"Hi","text":{"format":{"type":"json_object"}}}`); code != http.StatusBadRequest || e["param"] != "text.format" {
		t.Errorf("json_object to a worker without it: %d %v, want 400 naming text.format", code, e)
	}
	if code, _, _ := r.do(t, "GET", endpointResponses, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s: %d, want 405", endpointResponses, code)
	}
}

// An output message's id carries its text, so an item_reference to it
// (the AI SDK's replay of earlier output, unless store is false) is that
// assistant message, on any router, with no state.
func TestResponsesItemReference(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	other := startRouter(t, []*fakeWorker{a})
	_, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi"}`)
	id := decode(t, body)["output"].([]any)[0].(map[string]any)["id"].(string)
	got := lastMapped(t, other, a, endpointResponses, fmt.Sprintf(`{"model":"m","input":[
		{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"item_reference","id":%q},
		{"role":"user","content":[{"type":"input_text","text":"again"}]}]}`, id))
	want := []*workerv1.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "hello world"}, {Role: "user", Content: "again"}}
	if diff := cmp.Diff(want, got.GetMessages().GetMessages(), protocmp.Transform()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	_, _, body2 := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi"}`)
	if id2 := decode(t, body2)["output"].([]any)[0].(map[string]any)["id"]; id2 == id {
		t.Errorf("two answers of the same text have the same id %s", id)
	}
	for _, bad := range []string{id[:len(id)-3], "msg_A" + strings.Repeat("_", 10), randomItemID(prefixMessage), "msg_" + strings.Repeat("A", maxItemID)} {
		code, _, e := errorOf(t, r, endpointResponses, fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":"Hi"},{"type":"item_reference","id":%q}]}`, bad))
		if code != http.StatusBadRequest || e["param"] != "input[1].id" || !strings.Contains(e["message"].(string), "Send the item itself") {
			t.Errorf("item_reference %.30s: %d %v, want 400 naming input[1].id with the fix", bad, code, e)
		}
	}
}

// Ids: the shorter of raw and deflated text; text too long for an id gets
// a random one; a deflated id's text is bounded.
func TestItemIDs(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "Hello!", strings.Repeat("ab", 5000), "héllo\x00"} {
		id := itemID(text)
		budget := int64(1 << 20)
		got, err := decodeItemID(id, &budget)
		if err != nil || got != text {
			t.Errorf("%.20q: id %.30s decodes to %.20q, %v", text, id, got, err)
		}
		if len(text) > 1000 && len(id) > len(text)/10 {
			t.Errorf("id of %d repetitive bytes is %d long, want it deflated", len(text), len(id))
		}
	}
	if id := itemID(strings.Repeat("x", 100)); len(id) > 40 {
		t.Errorf("id of 100 x's is %d long: %s", len(id), id)
	}
	random := make([]byte, 30<<10)
	rand.Read(random)
	if id := itemID(base64.StdEncoding.EncodeToString(random)); len(id) > maxItemID || strings.HasPrefix(id, "msg_A") {
		t.Errorf("id of 40 KiB of text is %d long, %.10s: want a random one", len(id), id)
	}
	id := itemID(strings.Repeat("a", 100<<10))
	budget := int64(1 << 10)
	if _, err := decodeItemID(id, &budget); !errors.Is(err, errItemsTooLarge) {
		t.Errorf("an id of 100 KiB of text within 1 KiB: %v, want errItemsTooLarge", err)
	}
}

// The text all item_references of a request decode to is bounded by the
// body limit together, not each: forged ids of highly compressible text
// cannot make the router inflate far more than a request may hold.
func TestItemReferencesBoundedTogether(t *testing.T) {
	t.Parallel()
	r := startRouter(t, []*fakeWorker{chatWorker(t, "a", "m")})
	id := itemID(strings.Repeat("a", 600<<10)) // each within the 1 MiB body limit
	item := fmt.Sprintf(`{"type":"item_reference","id":%q}`, id)
	body := fmt.Sprintf(`{"model":"m","input":[%s,%s,%s]}`, item, item, item)
	code, _, e := errorOf(t, r, endpointResponses, body)
	if code != http.StatusBadRequest || e["param"] != "input[1].id" || !strings.Contains(e["message"].(string), "more text than a request may hold") {
		t.Errorf("three references of 600 KiB each: %d %v, want 400 naming input[1].id, the second, as too much text", code, e)
	}
}

// sseEvent is one event of a Responses stream: its event line and data.
type sseEvent struct {
	name string
	data map[string]any
}

func responseEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	var events []sseEvent
	for block := range strings.SplitSeq(strings.TrimSpace(body), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("event %q: want event: and data: lines", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		events = append(events, sseEvent{strings.TrimPrefix(name, "event: "), m})
	}
	return events
}

// A streamed response is the Responses API's event sequence, each event
// named by its event line and numbered.
func TestResponsesStream(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a})
	for _, tc := range []struct {
		length      bool
		end, status string
	}{{false, "response.completed", "completed"}, {true, "response.incomplete", "incomplete"}} {
		a.set(func(w *fakeWorker) { w.length = tc.length })
		code, hdr, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi","stream":true,"stream_options":{"include_obfuscation":false}}`)
		if code != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("got %d %s, want 200 text/event-stream:\n%s", code, hdr.Get("Content-Type"), body)
		}
		events := responseEvents(t, body)
		var names []string
		for i, e := range events {
			names = append(names, e.name)
			if e.data["type"] != e.name || e.data["sequence_number"] != float64(i) {
				t.Errorf("event %d %s: type %v, sequence_number %v", i, e.name, e.data["type"], e.data["sequence_number"])
			}
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
			"response.output_item.done", tc.end}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
		added := events[2].data["item"].(map[string]any)
		delta := events[4].data
		if added["status"] != "in_progress" || delta["item_id"] != added["id"] || delta["delta"] != "hello" || delta["output_index"] != 0.0 ||
			delta["content_index"] != 0.0 || delta["logprobs"] == nil || events[6].data["text"] != "hello world" {
			t.Errorf("item %v, delta %v, done %v", added, delta, events[6].data)
		}
		last := events[len(events)-1].data["response"].(map[string]any)
		item := last["output"].([]any)[0].(map[string]any)
		if last["status"] != tc.status || item["id"] != added["id"] || item["status"] != tc.status || last["usage"].(map[string]any)["output_tokens"] != 2.0 {
			t.Errorf("%s: response %v, want status %s, the item, usage", tc.end, last, tc.status)
		}
		if tc.length && (last["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || last["completed_at"] != nil) {
			t.Errorf("incomplete_details %v, completed_at %v: want reason max_output_tokens, no completed_at", last["incomplete_details"], last["completed_at"])
		}
		if created := events[0].data["response"].(map[string]any); created["status"] != "in_progress" || len(created["output"].([]any)) != 0 || created["usage"] != nil {
			t.Errorf("response.created: %v", created)
		}
	}
}

// The whole response at max_output_tokens is incomplete, with no
// completed_at (OpenAI's: only present when the status is completed).
func TestResponsesIncomplete(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	a.set(func(w *fakeWorker) { w.length = true })
	r := startRouter(t, []*fakeWorker{a})
	_, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi","max_output_tokens":2}`)
	got := decode(t, body)
	if got["status"] != "incomplete" || got["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" ||
		got["output"].([]any)[0].(map[string]any)["status"] != "incomplete" || got["completed_at"] != nil {
		t.Errorf("got %s, want status incomplete, reason max_output_tokens, completed_at null", body)
	}
}

// A stream that fails before its first token is an HTTP error, as chat's;
// one that fails after it ends with OpenAI's error event and
// response.failed.
func TestResponsesStreamFailure(t *testing.T) {
	t.Parallel()
	a := chatWorker(t, "a", "m")
	r := startRouter(t, []*fakeWorker{a}, withRetries(0))
	a.set(func(w *fakeWorker) { w.refuse = codes.Unavailable })
	if code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi","stream":true}`); code != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
		t.Errorf("refused before the first token: %d %s, want 503 with an error body", code, body)
	}
	a.set(func(w *fakeWorker) { w.refuse, w.breakAfterChunk = codes.OK, true })
	code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Hi","stream":true}`)
	events := responseEvents(t, body)
	n := len(events)
	if code != http.StatusOK || n < 3 || events[n-2].name != "error" || events[n-1].name != "response.failed" {
		t.Fatalf("broken after a chunk: %d %s, want 200 ending in error and response.failed", code, body)
	}
	if e := events[n-2].data; e["code"] != "server_error" || e["message"] != "engine lost" || e["sequence_number"] != float64(n-2) {
		t.Errorf("error event %v", e)
	}
	if f := events[n-1].data["response"].(map[string]any); f["status"] != "failed" || f["error"].(map[string]any)["message"] != "engine lost" {
		t.Errorf("response.failed %v", f)
	}
}

// A stream committed by heartbeats that then fails before its first token
// ends with one error event carrying the error its status would have had.
func TestResponsesStreamFailsAfterHeartbeat(t *testing.T) {
	t.Parallel()
	w := chatWorker(t, "a", "m")
	release := make(chan struct{})
	w.set(func(w *fakeWorker) { w.wait, w.refuse = release, codes.ResourceExhausted })
	r := startRouter(t, []*fakeWorker{w}, withHeartbeat(20*time.Millisecond), withRetries(0))
	resp, br := heldStream(t, r, endpointResponses, `{"model":"m","input":"Hi","stream":true}`)
	awaitHeartbeat(t, resp, br)
	close(release)
	events := responseEvents(t, rest(t, br))
	if len(events) != 1 || events[0].name != "error" || events[0].data["code"] != "rate_limit_error" || events[0].data["sequence_number"] != 0.0 {
		t.Errorf("events %v, want one error event, code rate_limit_error", events)
	}
}

// A Responses request goes only to workers with a chat template, as
// chat's; without one the 400 names input.
func TestResponsesNeedChatWorkers(t *testing.T) {
	t.Parallel()
	r := startRouter(t, []*fakeWorker{startWorker(t, "a", "m")})
	code, _, e := errorOf(t, r, endpointResponses, `{"model":"m","input":"Hi"}`)
	if code != http.StatusBadRequest || e["param"] != "input" || !strings.Contains(e["message"].(string), "no chat template") {
		t.Errorf("to a worker without a chat template: %d %v, want 400 naming input", code, e)
	}
}
