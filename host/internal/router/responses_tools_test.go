package router

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// scriptWorker is a chat worker with tool and reasoning parsers: it
// answers every request with its chunks, then a final of its reason.
type scriptWorker struct {
	workerv1.UnimplementedWorkerServer
	chunks []*workerv1.Chunk
	reason workerv1.FinishReason
	mu     sync.Mutex
	last   *workerv1.GenerateRequest
}

func (w *scriptWorker) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	w.mu.Lock()
	w.last = proto.CloneOf(req)
	w.mu.Unlock()
	for _, c := range w.chunks {
		if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: c}}); err != nil {
			return err
		}
	}
	return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{
		FinishReason: w.reason, RequestId: req.GetRequestId(),
		Usage: &workerv1.Usage{PromptTokens: 5, CompletionTokens: uint32(len(w.chunks)), ReasoningTokens: 2}}}})
}

func (w *scriptWorker) lastRequest() *workerv1.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// startScript serves w as a worker of model "m" listing caps, behind a
// router, until the test ends.
func startScript(t *testing.T, w *scriptWorker, caps string) *testRouter {
	t.Helper()
	ep := discovery.Registration{WorkerID: "s", Address: "127.0.0.1", Port: serveWorker(t, w),
		Model: "m", Engine: "fake", InstanceID: "s-1", Chat: true, Caps: discovery.ParseCapabilities(caps)}
	return startRouterAt(t, PoolConfig{Balance: RoundRobin}, []discovery.Registration{ep})
}

// thinkThenCall is a thinking model's answer that calls two functions:
// reasoning in two pieces, the newlines before the calls, the first
// call's arguments in two pieces.
func thinkThenCall() []*workerv1.Chunk {
	return []*workerv1.Chunk{
		{ReasoningText: "Weather"},
		{ReasoningText: " first."},
		{Text: "\n\n"},
		{ToolCalls: []*workerv1.ToolCallDelta{{Index: 0, Id: "call_1", Type: "function", Name: "weather", Arguments: `{"city":`}}},
		{ToolCalls: []*workerv1.ToolCallDelta{{Index: 0, Arguments: `"Oslo"}`}}},
		{ToolCalls: []*workerv1.ToolCallDelta{{Index: 1, Id: "call_2", Type: "function", Name: "time", Arguments: `{}`}}},
	}
}

const twoTools = `"tools":[{"type":"function","name":"weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true},
	{"type":"function","name":"time"}]`

// The AI SDK's tool loop, step 1: tools go to the worker in chat's shape
// and the answer is a reasoning item and two function_call items, no
// message (the newlines before the calls are none), usage with the
// reasoning tokens.
func TestResponsesFunctionCalls(t *testing.T) {
	t.Parallel()
	w := &scriptWorker{chunks: thinkThenCall(), reason: workerv1.FinishReason_FINISH_REASON_TOOL_CALLS}
	r := startScript(t, w, "tools,reasoning")
	code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Weather in Oslo?",`+twoTools+`,
		"tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":false,"max_tool_calls":2}`)
	if code != http.StatusOK {
		t.Fatalf("got %d:\n%s", code, body)
	}
	msgs := w.lastRequest().GetMessages()
	wantTools := `[{"type":"function","function":{"name":"weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}},` +
		`{"type":"function","function":{"name":"time"}}]`
	if msgs.GetTools() != wantTools || msgs.GetToolChoice().GetFunction() != "weather" || msgs.ParallelToolCalls == nil || *msgs.ParallelToolCalls {
		t.Errorf("worker got tools %s, tool_choice %v, parallel_tool_calls %v; want %s, weather, false", msgs.GetTools(), msgs.GetToolChoice(), msgs.ParallelToolCalls, wantTools)
	}
	got := decode(t, body)
	out := got["output"].([]any)
	for i, prefix := range []string{"rs_A", "fc_A", "fc_A"} {
		if len(out) == 3 && !strings.HasPrefix(out[i].(map[string]any)["id"].(string), prefix) {
			t.Errorf("output[%d].id = %v, want %s...", i, out[i].(map[string]any)["id"], prefix)
		}
		if len(out) == 3 {
			out[i].(map[string]any)["id"] = "ID"
		}
	}
	want := []any{
		map[string]any{"type": "reasoning", "id": "ID", "status": "completed",
			"summary": []any{map[string]any{"type": "summary_text", "text": "Weather first."}},
			"content": []any{map[string]any{"type": "reasoning_text", "text": "Weather first."}}},
		map[string]any{"type": "function_call", "id": "ID", "call_id": "call_1", "name": "weather", "arguments": `{"city":"Oslo"}`, "status": "completed"},
		map[string]any{"type": "function_call", "id": "ID", "call_id": "call_2", "name": "time", "arguments": `{}`, "status": "completed"},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if u := got["usage"].(map[string]any)["output_tokens_details"].(map[string]any)["reasoning_tokens"]; u != 2.0 {
		t.Errorf("reasoning_tokens = %v, want 2", u)
	}
	if got["tool_choice"].(map[string]any)["name"] != "weather" || len(got["tools"].([]any)) != 2 || got["max_tool_calls"] != 2.0 || got["status"] != "completed" {
		t.Errorf("echo: tool_choice %v, tools %v, max_tool_calls %v, status %v", got["tool_choice"], got["tools"], got["max_tool_calls"], got["status"])
	}
}

// Step 2 of the loop as the AI SDK sends it with store (its default):
// item_references to the reasoning and calls of step 1, then the
// calls' outputs. The ids carry the items, so the worker gets one
// assistant turn with the reasoning and both calls, then the tool turns,
// with no state. Items sent whole (store false) map the same.
func TestResponsesToolLoopReplay(t *testing.T) {
	t.Parallel()
	w := &scriptWorker{chunks: thinkThenCall(), reason: workerv1.FinishReason_FINISH_REASON_TOOL_CALLS}
	r := startScript(t, w, "tools,reasoning")
	_, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Weather in Oslo?",`+twoTools+`}`)
	var ids []string
	for _, it := range decode(t, body)["output"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	outputs := `{"type":"function_call_output","call_id":"call_1","output":"sunny"},
		{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"12:00"}]}`
	want := []*workerv1.Message{
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", ReasoningContent: "Weather first.", ToolCalls: []*workerv1.ToolCall{
			{Id: "call_1", Type: "function", Name: "weather", Arguments: `{"city":"Oslo"}`},
			{Id: "call_2", Type: "function", Name: "time", Arguments: `{}`}}},
		{Role: "tool", ToolCallId: "call_1", Content: "sunny"},
		{Role: "tool", ToolCallId: "call_2", Content: "12:00"},
	}
	for name, input := range map[string]string{
		"item_reference": fmt.Sprintf(`{"role":"user","content":"Weather in Oslo?"},{"type":"item_reference","id":%q},
			{"type":"item_reference","id":%q},{"type":"item_reference","id":%q},`, ids[0], ids[1], ids[2]) + outputs,
		"whole": `{"role":"user","content":"Weather in Oslo?"},{"type":"reasoning","id":"rs_x","summary":[{"type":"summary_text","text":"Weather first."}]},
			{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
			{"type":"function_call","id":"fc_1","call_id":"call_2","name":"time","arguments":"{}","status":"completed"},` + outputs,
	} {
		code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m",`+twoTools+`,"input":[`+input+`]}`)
		if code != http.StatusOK {
			t.Fatalf("%s: %d:\n%s", name, code, body)
		}
		if diff := cmp.Diff(want, w.lastRequest().GetMessages().GetMessages(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: messages (-want +got):\n%s", name, diff)
		}
	}
}

// Turns merge as chat has them: an assistant message and the calls after
// it are one turn; reasoning goes to the next assistant turn and ends the
// open one; reasoning with no assistant turn after it is not sent.
func TestResponsesInputTurns(t *testing.T) {
	t.Parallel()
	w := &scriptWorker{reason: workerv1.FinishReason_FINISH_REASON_STOP}
	r := startScript(t, w, "tools")
	call := func(id string) string {
		return fmt.Sprintf(`{"type":"function_call","call_id":%q,"name":"f","arguments":"{}"}`, id)
	}
	tc := func(id string) *workerv1.ToolCall {
		return &workerv1.ToolCall{Id: id, Type: "function", Name: "f", Arguments: "{}"}
	}
	for _, c := range []struct {
		name, input string
		want        []*workerv1.Message
	}{
		{"message then calls", `{"role":"user","content":"q"},{"role":"assistant","content":"Let me look."},` + call("a") + `,` + call("b"),
			[]*workerv1.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "Let me look.", ToolCalls: []*workerv1.ToolCall{tc("a"), tc("b")}}}},
		{"reasoning splits", `{"role":"user","content":"q"},` + call("a") + `,{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"more"}]},` + call("b"),
			[]*workerv1.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []*workerv1.ToolCall{tc("a")}},
				{Role: "assistant", ReasoningContent: "more", ToolCalls: []*workerv1.ToolCall{tc("b")}}}},
		{"reasoning to message", `{"role":"user","content":"q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},{"role":"assistant","content":"a"},{"role":"user","content":"q2"}`,
			[]*workerv1.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a", ReasoningContent: "s"}, {Role: "user", Content: "q2"}}},
		{"reasoning unsent", `{"role":"user","content":"q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},{"role":"user","content":"q2"}`,
			[]*workerv1.Message{{Role: "user", Content: "q"}, {Role: "user", Content: "q2"}}},
		{"output ends the turn", `{"role":"user","content":"q"},` + call("a") + `,{"type":"function_call_output","call_id":"a","output":"1"},` + call("b"),
			[]*workerv1.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []*workerv1.ToolCall{tc("a")}},
				{Role: "tool", ToolCallId: "a", Content: "1"}, {Role: "assistant", ToolCalls: []*workerv1.ToolCall{tc("b")}}}},
	} {
		code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":[`+c.input+`]}`)
		if code != http.StatusOK {
			t.Fatalf("%s: %d:\n%s", c.name, code, body)
		}
		if diff := cmp.Diff(c.want, w.lastRequest().GetMessages().GetMessages(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: messages (-want +got):\n%s", c.name, diff)
		}
	}
}

// A tool turn in the input (or tools offered) needs a worker that lists
// tools: the 400 names tools, with no worker asked.
func TestResponsesToolsNeedWorkers(t *testing.T) {
	t.Parallel()
	w := &scriptWorker{reason: workerv1.FinishReason_FINISH_REASON_STOP}
	r := startScript(t, w, "reasoning")
	for _, input := range []string{
		`"input":"q",` + twoTools,
		`"input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}]`,
		`"input":[{"role":"user","content":"q"},{"type":"function_call_output","call_id":"a","output":"1"}]`,
	} {
		code, _, e := errorOf(t, r, endpointResponses, `{"model":"m",`+input+`}`)
		if code != http.StatusBadRequest || e["param"] != "tools" || !strings.Contains(e["message"].(string), "capability tools") {
			t.Errorf("%s: %d %v, want 400 naming tools", input, code, e)
		}
	}
	if w.lastRequest() != nil {
		t.Errorf("the worker was asked: %v", w.lastRequest())
	}
	// tool_choice none and no tools: nothing asked of the worker.
	if code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"q","tools":[],"tool_choice":"none","parallel_tool_calls":true}`); code != http.StatusOK {
		t.Errorf("no tools: %d %s", code, body)
	}
	if msgs := w.lastRequest().GetMessages(); msgs.GetTools() != "" || msgs.ToolChoice != nil || msgs.ParallelToolCalls != nil {
		t.Errorf("no tools: the worker got tools %q, tool_choice %v, parallel_tool_calls %v", msgs.GetTools(), msgs.ToolChoice, msgs.ParallelToolCalls)
	}
}

// Streamed, the items come as OpenAI's events in order, numbered: the
// reasoning's (reasoning_text and, for the AI SDK, summary_text), then
// each call's added, arguments in pieces, done. The final response holds
// the same items. A streamed item's id carries nothing: an item_reference
// to the reasoning is left out, one to a call is refused.
func TestResponsesStreamFunctionCalls(t *testing.T) {
	t.Parallel()
	w := &scriptWorker{chunks: thinkThenCall(), reason: workerv1.FinishReason_FINISH_REASON_TOOL_CALLS}
	r := startScript(t, w, "tools,reasoning")
	code, _, body := r.do(t, "POST", endpointResponses, `{"model":"m","input":"Weather?","stream":true,`+twoTools+`}`)
	if code != http.StatusOK {
		t.Fatalf("got %d:\n%s", code, body)
	}
	events := responseEvents(t, body)
	var names []string
	for i, e := range events {
		names = append(names, e.name)
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: sequence_number %v", i, e.name, e.data["sequence_number"])
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_summary_part.added",
		"response.reasoning_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	rs, fc := events[2].data["item"].(map[string]any), events[14].data["item"].(map[string]any)
	if !strings.HasPrefix(rs["id"].(string), "rs_") || rs["type"] != "reasoning" || events[5].data["item_id"] != rs["id"] || events[5].data["delta"] != "Weather" {
		t.Errorf("reasoning added %v, delta %v", rs, events[5].data)
	}
	if fc["call_id"] != "call_1" || fc["name"] != "weather" || fc["arguments"] != "" || fc["status"] != "in_progress" || events[14].data["output_index"] != 1.0 {
		t.Errorf("call added %v at %v, want call_1 weather, no arguments yet, at 1", fc, events[14].data["output_index"])
	}
	if d := events[16].data; d["item_id"] != fc["id"] || d["delta"] != `"Oslo"}` || d["output_index"] != 1.0 {
		t.Errorf("arguments delta %v", d)
	}
	if d := events[17].data; d["arguments"] != `{"city":"Oslo"}` {
		t.Errorf("arguments done %v", d)
	}
	final := events[len(events)-1].data["response"].(map[string]any)["output"].([]any)
	if len(final) != 3 || final[1].(map[string]any)["id"] != fc["id"] || final[1].(map[string]any)["arguments"] != `{"city":"Oslo"}` {
		t.Errorf("final output %v", final)
	}
	ref := func(id string) string {
		return fmt.Sprintf(`{"model":"m",`+twoTools+`,"input":[{"role":"user","content":"q"},{"type":"item_reference","id":%q},{"type":"function_call","call_id":"c","name":"time","arguments":"{}"}]}`, id)
	}
	if code, _, body := r.do(t, "POST", endpointResponses, ref(rs["id"].(string))); code != http.StatusOK {
		t.Errorf("streamed reasoning's item_reference: %d %s", code, body)
	} else if got := w.lastRequest().GetMessages().GetMessages(); len(got) != 2 || got[1].GetReasoningContent() != "" {
		t.Errorf("streamed reasoning's item_reference: messages %v, want the call's turn without reasoning", got)
	}
	if code, _, e := errorOf(t, r, endpointResponses, ref(fc["id"].(string))); code != http.StatusBadRequest || e["param"] != "input[1].id" {
		t.Errorf("streamed call's item_reference: %d %v, want 400 naming input[1].id", code, e)
	}
}

// The items do not depend on how the worker's chunks cut the text:
// leading whitespace split at every byte still starts no message before a
// call, and goes in front of text that follows it.
func TestRespOutputSplits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		call       bool
		want       []string // kinds:text
	}{
		{"whitespace then call", " \n\n ", true, []string{"function_call:{}"}},
		{"text then call", "\n Hi", true, []string{"message:\n Hi", "function_call:{}"}},
		{"whitespace only", "\n\n", false, []string{"message:\n\n"}},
		{"text", "  hello world", false, []string{"message:  hello world"}},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			o := &respOutput{}
			for _, piece := range []string{c.text[:cut], c.text[cut:]} {
				if piece != "" {
					o.add(&workerv1.Chunk{Text: piece})
				}
			}
			if c.call {
				o.add(&workerv1.Chunk{ToolCalls: []*workerv1.ToolCallDelta{{Id: "c", Name: "f", Arguments: "{}"}}})
			}
			o.finish("completed")
			var got []string
			for _, it := range o.items {
				got = append(got, it.kind+":"+it.text.String())
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s cut at %d (-want +got):\n%s", c.name, cut, diff)
			}
		}
	}
}

// A call's id carries call_id, name and arguments; a reasoning id its
// text: each decodes to what it was made of.
func TestCallAndReasoningIDs(t *testing.T) {
	t.Parallel()
	budget := int64(1 << 20)
	id := callItemID("call_1", "f", `{"a":"`+strings.Repeat("x", 500)+`"}`)
	payload, err := decodeItemID(id, &budget)
	var f []string
	if err != nil || json.Unmarshal([]byte(payload), &f) != nil || f[0] != "call_1" || f[1] != "f" || len(f[2]) != 508 || !strings.HasPrefix(id, "fc_A") {
		t.Errorf("call id %.20s: %v %v", id, f, err)
	}
	rs := payloadID(prefixReasoning, "thinking")
	if got, err := decodeItemID(rs, &budget); err != nil || got != "thinking" || !strings.HasPrefix(rs, "rs_A") {
		t.Errorf("reasoning id %s: %q %v", rs, got, err)
	}
}

// With text.format set too, the tools need is still told as tools.
func TestResponsesToolsNeedNamedWithFormat(t *testing.T) {
	t.Parallel()
	r := startScript(t, &scriptWorker{reason: workerv1.FinishReason_FINISH_REASON_STOP}, "json_object")
	code, _, e := errorOf(t, r, endpointResponses, `{"model":"m","input":"q",`+twoTools+`,"text":{"format":{"type":"json_object"}}}`)
	if code != http.StatusBadRequest || e["param"] != "tools" {
		t.Errorf("%d %v, want 400 naming tools", code, e)
	}
}
