package router

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// weatherTool is a tool as the AI SDK and LangChain send it, spaced and
// its keys in no sorted order.
const weatherTool = `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "description": "The weather in a city", "strict": false}}`

// weatherText is weatherTool as the worker gets it: compact, keys in the
// client's order.
const weatherText = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"description":"The weather in a city","strict":false}}`

const timeTool = `{"type":"function","function":{"name":"get-time"}}`

func mode(m workerv1.ToolChoiceMode) *workerv1.ToolChoice {
	return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: m}}
}

// tools, tool_choice and parallel_tool_calls reach the worker's Messages
// as the template takes them; so does a whole tool loop replayed.
func TestToolRequestMapping(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	user := []*workerv1.Message{{Role: "user", Content: "hi"}}
	both := "[" + weatherText + "," + timeTool + "]"
	for _, tc := range []struct {
		name, fields string
		want         *workerv1.Messages
	}{
		{"tools", `"tools":[` + weatherTool + `]`, &workerv1.Messages{Messages: user, Tools: "[" + weatherText + "]"}},
		{"auto, parallel false", `"tools":[` + weatherTool + `,` + timeTool + `],"tool_choice":"auto","parallel_tool_calls":false`,
			&workerv1.Messages{Messages: user, Tools: both, ToolChoice: mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO), ParallelToolCalls: proto.Bool(false)}},
		{"required", `"tools":[` + weatherTool + `,` + timeTool + `],"tool_choice":"required","parallel_tool_calls":true`,
			&workerv1.Messages{Messages: user, Tools: both, ToolChoice: mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED), ParallelToolCalls: proto.Bool(true)}},
		{"none", `"tools":[` + timeTool + `],"tool_choice":"none"`,
			&workerv1.Messages{Messages: user, Tools: "[" + timeTool + "]", ToolChoice: mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE)}},
		{"named", `"tools":[` + weatherTool + `,` + timeTool + `],"tool_choice":{"type":"function","function":{"name":"get-time"}}`,
			&workerv1.Messages{Messages: user, Tools: both, ToolChoice: &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Function{Function: "get-time"}}}},
		{"none without tools, parallel without tools", `"tools":[],"tool_choice":"none","parallel_tool_calls":true`, &workerv1.Messages{Messages: user}},
		{"nulls", `"tools":null,"tool_choice":null,"parallel_tool_calls":null,"functions":[],"function_call":"none"`, &workerv1.Messages{Messages: user}},
	} {
		got := lastMapped(t, r, a, endpointChat, `{"model":"m",`+userHi+`,`+tc.fields+`}`)
		if diff := cmp.Diff(tc.want, got.GetMessages(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: messages (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A tool loop as the AI SDK, LangChain and the openai package replay it:
// the assistant's calls (content null or absent, arguments text, a
// stream accumulator's index), the tool turns answering them, and
// reasoning under both its names.
func TestToolLoopReplayed(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	got := lastMapped(t, r, a, endpointChat, `{"model":"m","tools":[`+weatherTool+`],"messages":[
		{"role":"user","content":"Weather in Paris and Rome?"},
		{"role":"assistant","content":null,"reasoning_content":"Two cities.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
			{"index":1,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":""}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny"},
		{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"rain"}]},
		{"role":"assistant","content":"Sunny, then rain.","reasoning":"Done."},
		{"role":"assistant","content":"x","reasoning":"old","reasoning_content":"new","tool_calls":[{"id":"c","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"user","content":"Thanks"}]}`)
	want := []*workerv1.Message{
		{Role: "user", Content: "Weather in Paris and Rome?"},
		{Role: "assistant", ReasoningContent: "Two cities.", ToolCalls: []*workerv1.ToolCall{
			{Id: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{Id: "call_2", Type: "function", Name: "get_weather", Arguments: "{}"}}},
		{Role: "tool", ToolCallId: "call_1", Content: "sunny"},
		{Role: "tool", ToolCallId: "call_2", Content: "rain"},
		{Role: "assistant", Content: "Sunny, then rain.", ReasoningContent: "Done."},
		{Role: "assistant", Content: "x", ReasoningContent: "new", ToolCalls: []*workerv1.ToolCall{{Id: "c", Type: "function", Name: "get_weather", Arguments: "{}"}}},
		{Role: "user", Content: "Thanks"},
	}
	if diff := cmp.Diff(want, got.GetMessages().GetMessages(), protocmp.Transform()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// Bad tools, tool_choice and tool turns get 400 naming the field, before
// any worker is asked.
func TestToolRequestErrors(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	r := startRouter(t, []*fakeWorker{a})
	many := strings.Repeat(timeTool+",", maxTools) + timeTool
	for _, tc := range []struct{ fields, param, msg string }{
		{`"tools":{"type":"function"}`, "tools", "want an array"},
		{`"tools":[1]`, "tools", "want an array"},
		{`"tools":[{"type":"custom","custom":{"name":"f"}}]`, "tools[0].type", `want "function"`},
		{`"tools":[{"function":{"name":"f"}}]`, "tools[0].type", "got none"},
		{`"tools":[{"type":"function","function":{"name":"f"},"x":1}]`, "tools[0].x", "not a field of a tool"},
		{`"tools":[{"type":"function"}]`, "tools[0].function", "want an object"},
		{`"tools":[{"type":"function","function":"f"}]`, "tools[0].function", "want an object"},
		{`"tools":[{"type":"function","function":{"description":"d"}}]`, "tools[0].function.name", "1 to 64 letters"},
		{`"tools":[{"type":"function","function":{"name":"get weather"}}]`, "tools[0].function.name", "1 to 64 letters"},
		{`"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`, "tools[0].function.name", "1 to 64"},
		{`"tools":[` + timeTool + `,{"type":"function","function":{"name":5}}]`, "tools[1].function.name", "got 5"},
		{`"tools":[{"type":"function","function":{"name":"f","description":1}}]`, "tools[0].function.description", "want a string"},
		{`"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]`, "tools[0].function.parameters", "JSON Schema object"},
		{`"tools":[{"type":"function","function":{"name":"f","strict":"yes"}}]`, "tools[0].function.strict", "boolean"},
		{`"tools":[{"type":"function","function":{"name":"f","returns":{}}}]`, "tools[0].function.returns", "not a field of a function tool"},
		{`"tools":[` + timeTool + `,` + timeTool + `]`, "tools[1].function.name", "offered twice"},
		{`"tools":[` + many + `]`, "tools", "at most 128"},
		{`"tool_choice":"auto"`, "tool_choice", "only allowed when tools are specified"},
		{`"tool_choice":"required","tools":[]`, "tool_choice", "only allowed when tools are specified"},
		{`"tool_choice":{"type":"function","function":{"name":"get-time"}}`, "tool_choice", "only allowed when tools"},
		{`"tools":[` + timeTool + `],"tool_choice":"any"`, "tool_choice", `want "none", "auto", "required" or a function`},
		{`"tools":[` + timeTool + `],"tool_choice":""`, "tool_choice", `want "none"`},
		{`"tools":[` + timeTool + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}}`, "tool_choice", `"get_weather" is not among tools (get-time)`},
		{`"tools":[` + timeTool + `],"tool_choice":{"type":"function","name":"get-time"}`, "tool_choice", `{"type": "function", "function": {"name": ...}}`},
		{`"tools":[` + timeTool + `],"tool_choice":5`, "tool_choice", "want"},
		{`"tools":[` + timeTool + `],"parallel_tool_calls":"no"`, "parallel_tool_calls", "boolean"},
		{`"functions":[{"name":"f"}]`, "functions", "send tools instead"},
		{`"function_call":{"name":"f"}`, "function_call", "send tool_choice instead"},
	} {
		code, _, e := errorOf(t, r, endpointChat, `{"model":"m",`+userHi+`,`+tc.fields+`}`)
		if code != http.StatusBadRequest || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.msg) {
			t.Errorf("%s: %d %v, want 400 with param %s and a message containing %q", tc.fields, code, e, tc.param, tc.msg)
		}
	}
	for _, tc := range []struct{ msgs, want string }{
		{`{"role":"user","content":"x","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "messages[0].tool_calls: only assistant messages carry tool_calls"},
		{`{"role":"user","content":"x","tool_call_id":"1"}`, "messages[0].tool_call_id: only tool messages carry tool_call_id"},
		{`{"role":"user","content":"x","reasoning_content":"r"}`, "messages[0].reasoning_content: only assistant messages"},
		{`{"role":"tool","content":"x"}`, "messages[0].tool_call_id: required for a tool message"},
		{`{"role":"tool","content":"x","tool_call_id":""}`, "messages[0].tool_call_id: required"},
		{`{"role":"tool","content":"x","tool_call_id":7}`, "messages[0].tool_call_id: want a string"},
		{`{"role":"tool","tool_call_id":"1"}`, "messages[0].content: required for role \"tool\""},
		{`{"role":"assistant","tool_calls":{"id":"1"}}`, "messages[0].tool_calls: want an array"},
		{`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`, "messages[0].tool_calls[0].id: required"},
		{`{"role":"assistant","tool_calls":[{"id":"1","type":"code","function":{"name":"f"}}]}`, `messages[0].tool_calls[0].type: want "function"`},
		{`{"role":"assistant","tool_calls":[{"id":"1","type":"function"}]}`, "messages[0].tool_calls[0].function.name: required"},
		{`{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, "messages[0].tool_calls[0].function.arguments: want the call's arguments as JSON text"},
		{`{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"a":1}}}]}`, "messages[0].tool_calls: want an array"},
		{`{"role":"assistant","content":"x","reasoning":{"text":"r"}}`, "messages[0].reasoning: want a string"},
		{`{"role":"assistant","content":"x","function_call":{"name":"f","arguments":"{}"}}`, "messages[0].function_call: the deprecated function calling"},
	} {
		code, _, e := errorOf(t, r, endpointChat, `{"model":"m","messages":[`+tc.msgs+`]}`)
		if code != http.StatusBadRequest || e["param"] != "messages" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: %d %v, want 400 naming messages: %q", tc.msgs, code, e, tc.want)
		}
	}
	if n := a.requests.Load(); n != 0 {
		t.Errorf("the worker got %d requests, want none", n)
	}
}

// Tools, and turns with calls or answering one, go only to workers that
// list tools; else 400 naming tools, saying what such a worker needs.
func TestToolsNeedAWorkerThatListsThem(t *testing.T) {
	t.Parallel()
	plain := chatWorker(t, "p", "plain")
	withTools := capsWorker(t, "t", "m", "tools")
	without := capsWorker(t, "o", "m", "stop")
	r := startRouter(t, []*fakeWorker{plain, withTools, without})
	for _, body := range []string{
		`"tools":[` + timeTool + `]`,
		`"tools":[` + timeTool + `],"tool_choice":"none"`,
		`"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
		`"messages":[{"role":"tool","tool_call_id":"1","content":"x"}]`,
	} {
		if !strings.Contains(body, `"messages"`) {
			body = userHi + "," + body
		}
		code, _, e := errorOf(t, r, endpointChat, `{"model":"plain",`+body+`}`)
		if code != http.StatusBadRequest || e["param"] != "tools" || !strings.Contains(e["message"].(string), "capability tools") ||
			!strings.Contains(e["message"].(string), "--tokenizer-dir") {
			t.Errorf("%s: %d %v, want 400 naming tools with a hint", body, code, e)
		}
		for range 3 {
			lastMapped(t, r, withTools, endpointChat, `{"model":"m",`+body+`}`)
		}
	}
	if n := plain.requests.Load() + without.requests.Load(); n != 0 {
		t.Errorf("workers without tools got %d requests, want none", n)
	}
	// Without tools, any worker of the model.
	for range 2 {
		lastMapped(t, r, withTools, endpointChat, `{"model":"m",`+userHi+`,"tools":[],"tool_choice":"none"}`)
	}
	if without.requests.Load() == 0 {
		t.Errorf("a request without tools never reached the worker that does not list tools")
	}
}

// toolScript is a thinking model's answer with two tool calls, as a
// worker's parsers split it: reasoning, text, then each call named and
// its arguments in pieces.
var toolScript = []*workerv1.Chunk{
	{ReasoningText: "The user wants ", TokenIds: []uint32{1}},
	{ReasoningText: "the weather.", TokenIds: []uint32{2}},
	{Text: "Checking.", TokenIds: []uint32{3}},
	{TokenIds: []uint32{4}, ToolCalls: []*workerv1.ToolCallDelta{{Index: 0, Id: "call_a", Type: "function", Name: "get_weather"}}},
	{TokenIds: []uint32{5}, ToolCalls: []*workerv1.ToolCallDelta{{Index: 0, Arguments: `{"city": `}}},
	{TokenIds: []uint32{6}, ToolCalls: []*workerv1.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}, {Index: 1, Id: "call_b", Type: "function", Name: "get-time", Arguments: "{}"}}},
}

// A whole answer carries the calls assembled from their pieces,
// reasoning_content (and reasoning) and finish_reason tool_calls, for
// each of n choices; content is null when a call came without text.
func TestToolCallsAnswered(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	a.set(func(w *fakeWorker) {
		w.script, w.finish, w.reasoning = toolScript, workerv1.FinishReason_FINISH_REASON_TOOL_CALLS, 2
	})
	r := startRouter(t, []*fakeWorker{a})
	code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"tools":[`+weatherTool+`,`+timeTool+`],"n":2}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	calls := []any{
		map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city": "Paris"}`}},
		map[string]any{"id": "call_b", "type": "function", "function": map[string]any{"name": "get-time", "arguments": "{}"}},
	}
	msg := map[string]any{"role": "assistant", "content": "Checking.", "reasoning_content": "The user wants the weather.",
		"reasoning": "The user wants the weather.", "tool_calls": calls}
	var want []any
	for j := range 2 {
		want = append(want, map[string]any{"index": float64(j), "message": msg, "logprobs": nil, "finish_reason": "tool_calls"})
	}
	if diff := cmp.Diff(want, field(t, body, "choices")); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	wantUsage := map[string]any{"prompt_tokens": 0.0, "completion_tokens": 6.0, "total_tokens": 6.0,
		"completion_tokens_details": map[string]any{"reasoning_tokens": 2.0}}
	if diff := cmp.Diff(wantUsage, field(t, body, "usage")); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	// Calls without text: content null; no reasoning: no reasoning keys.
	a.set(func(w *fakeWorker) { w.script, w.reasoning = toolScript[3:], 0 })
	_, _, body = r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"tools":[`+weatherTool+`]}`)
	if diff := cmp.Diff(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, field(t, body, "choices", 0, "message")); diff != "" {
		t.Errorf("calls alone: message (-want +got):\n%s", diff)
	}
	if u := field(t, body, "usage").(map[string]any); u["completion_tokens_details"] != nil {
		t.Errorf("usage %v: want no completion_tokens_details without reasoning tokens", u)
	}

	// Reasoning and an answer, no call: content kept, finish_reason stop.
	a.set(func(w *fakeWorker) {
		w.script, w.finish = toolScript[:3], workerv1.FinishReason_FINISH_REASON_STOP
	})
	_, _, body = r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`}`)
	wantMsg := map[string]any{"role": "assistant", "content": "Checking.", "reasoning_content": "The user wants the weather.", "reasoning": "The user wants the weather."}
	if diff := cmp.Diff(wantMsg, field(t, body, "choices", 0, "message")); diff != "" {
		t.Errorf("reasoning: message (-want +got):\n%s", diff)
	}
	if fr := field(t, body, "choices", 0, "finish_reason"); fr != "stop" {
		t.Errorf("finish_reason = %v, want stop", fr)
	}
}

// A stream sends reasoning, content and each call's pieces as OpenAI
// streams them: a call's first delta with index, id, type, name and
// arguments "", then its arguments in pieces; finish_reason tool_calls;
// each of n choices separately.
func TestToolCallsStreamed(t *testing.T) {
	t.Parallel()
	a := capsWorker(t, "a", "m", allCaps)
	a.set(func(w *fakeWorker) {
		w.script, w.finish, w.reasoning = toolScript, workerv1.FinishReason_FINISH_REASON_TOOL_CALLS, 2
	})
	r := startRouter(t, []*fakeWorker{a})
	code, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"tools":[`+weatherTool+`,`+timeTool+`],"n":2,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	events := sseEvents(t, body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
	}
	deltas, reasons := map[float64][]any{}, map[float64][]any{}
	for _, e := range events[:len(events)-2] {
		for _, c := range field(t, e, "choices").([]any) {
			c := c.(map[string]any)
			deltas[c["index"].(float64)] = append(deltas[c["index"].(float64)], c["delta"])
			reasons[c["index"].(float64)] = append(reasons[c["index"].(float64)], c["finish_reason"])
		}
	}
	call := func(i float64, id, name string) any {
		return map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""}}}}
	}
	args := func(i float64, piece string) any {
		return map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}
	}
	want := []any{
		map[string]any{"role": "assistant", "content": ""},
		map[string]any{"reasoning_content": "The user wants ", "reasoning": "The user wants "},
		map[string]any{"reasoning_content": "the weather.", "reasoning": "the weather."},
		map[string]any{"content": "Checking."},
		call(0, "call_a", "get_weather"),
		args(0, `{"city": `),
		args(0, `"Paris"}`),
		call(1, "call_b", "get-time"),
		args(1, "{}"),
		map[string]any{},
	}
	for _, j := range []float64{0, 1} {
		if diff := cmp.Diff(want, deltas[j]); diff != "" {
			t.Errorf("choice %v: deltas (-want +got):\n%s", j, diff)
		}
		if got := reasons[j][len(reasons[j])-1]; got != "tool_calls" {
			t.Errorf("choice %v: last finish_reason %v, want tool_calls", j, got)
		}
	}
	usage := field(t, events[len(events)-2], "usage", "completion_tokens_details", "reasoning_tokens")
	if usage != 2.0 {
		t.Errorf("usage's reasoning_tokens = %v, want 2", usage)
	}
}

// A chunk's logprobs go with its text, or with its first event when it
// has none.
func TestToolChunkLogprobs(t *testing.T) {
	t.Parallel()
	lp := fakeLogprobs(true, "x", 0)
	a := capsWorker(t, "a", "m", allCaps+",logprobs=5")
	a.set(func(w *fakeWorker) {
		w.script = []*workerv1.Chunk{
			{ReasoningText: "r", Text: "x", Logprobs: lp},
			{ToolCalls: []*workerv1.ToolCallDelta{{Id: "c", Name: "get-time", Arguments: "{}"}}, Logprobs: lp},
		}
		w.finish = workerv1.FinishReason_FINISH_REASON_TOOL_CALLS
	})
	r := startRouter(t, []*fakeWorker{a})
	_, _, body := r.do(t, "POST", endpointChat, `{"model":"m",`+userHi+`,"tools":[`+timeTool+`],"logprobs":true,"stream":true}`)
	var with []string
	for _, e := range sseEvents(t, body) {
		if e == "[DONE]" {
			continue
		}
		c := field(t, e, "choices", 0).(map[string]any)
		if c["logprobs"] != nil {
			with = append(with, fmt.Sprint(c["delta"]))
		}
	}
	want := []string{"map[content:x]", "map[tool_calls:[map[function:map[arguments: name:get-time] id:c index:0 type:function]]]"}
	if diff := cmp.Diff(want, with); diff != "" {
		t.Errorf("deltas with logprobs (-want +got):\n%s", diff)
	}
}

// /tokenize renders a replayed tool loop only on workers that list tools.
func TestTokenizeToolTurns(t *testing.T) {
	t.Parallel()
	r := tokRouter(t, startTokWorker(t, "tok", "m", "tokenize"), startTokWorker(t, "tools", "t", "tokenize,tools"))
	const msgs = `"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"ok"}]`
	code, _, e := errorOf(t, r, "/tokenize", `{"model":"m",`+msgs+`}`)
	if code != http.StatusBadRequest || e["param"] != "tools" {
		t.Errorf("a worker without tools: %d %v, want 400 naming tools", code, e)
	}
	if code, _, body := r.do(t, http.MethodPost, "/tokenize", `{"model":"t",`+msgs+`}`); code != http.StatusOK {
		t.Errorf("a worker with tools: %d %s, want 200", code, body)
	}
}

// A call's pieces join by index; an index past the next call's starts
// the next one (no gap, whatever a worker sends).
func TestCallPiecesJoined(t *testing.T) {
	run := &promptRun{calls: make([][]*callAcc, 2)}
	run.addCalls(1, []*workerv1.ToolCallDelta{{Index: 0, Id: "a", Name: "f", Arguments: `{"x"`}, {Index: 0, Arguments: `:1}`}})
	run.addCalls(1, []*workerv1.ToolCallDelta{{Index: 1 << 30, Id: "b", Type: "function", Name: "g"}, {Index: 1, Arguments: "{}"}})
	want := []*workerv1.ToolCall{{Id: "a", Type: "function", Name: "f", Arguments: `{"x":1}`}, {Id: "b", Type: "function", Name: "g", Arguments: "{}"}}
	if diff := cmp.Diff(want, run.toolCalls(1), protocmp.Transform()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := run.toolCalls(0); got != nil {
		t.Errorf("choice 0: calls %v, want none", got)
	}
}

// parseChatTools never panics, and what it passes is a JSON array of as
// many tools as names.
func FuzzChatTools(f *testing.F) {
	for _, s := range []string{"[" + weatherTool + "]", "[" + timeTool + "," + weatherTool + "]", "[]", "null", `[{"type":"function","function":{"name":"f","parameters":{}}}]`, `[{"type":"function","function":null}]`, "{", `[{"type":"function","function":{"name":"f"},"function":{}}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, text, aerr := parseChatTools(json.RawMessage(s))
		if aerr != nil || text == "" {
			return
		}
		var tools []any
		if err := json.Unmarshal([]byte(text), &tools); err != nil || len(tools) != len(names) {
			t.Errorf("%s: passed %s (%v), %d names", s, text, err, len(names))
		}
	})
}
