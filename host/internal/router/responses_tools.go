package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// Function tools on the Responses API, as OpenAI's (the openai package's
// resources/responses/responses.d.ts: FunctionTool, ToolChoiceFunction,
// ResponseFunctionToolCall, ResponseReasoningItem) and vLLM's
// (vllm/entrypoints/openai/serving_responses.py), mapped onto the worker
// request a chat completion with tools is.

// respTool is a Responses function tool: {type, name, description,
// parameters, strict}, the chat tool's function flat in the tool.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description json.RawMessage `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// respToolNeutral are the fields of a function tool that vigil takes at
// their neutral values only: each is OpenAI's own machinery (deferred
// tool search, programmatic and async calls).
var respToolNeutral = map[string]func(json.RawMessage) bool{
	"defer_loading":   oneOf(`false`),
	"async":           oneOf(`false`),
	"allowed_callers": oneOf(`["direct"]`),
	"output_schema":   func(json.RawMessage) bool { return true }, // describes the output; not rendered
}

// parseTools reads tools: function tools only, converted to the chat
// shape the worker's template takes ([{"type": "function", "function":
// {...}}]). It returns the chat text ("" for none), the names offered,
// and the tools as a response echoes them.
func parseTools(raw json.RawMessage) (string, map[string]bool, []respTool, *apiError) {
	if isNull(raw) {
		return "", nil, nil, nil
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return "", nil, nil, badRequest("tools", `tools: want a list of function tools such as {"type": "function", "name": "f", "parameters": {...}}`)
	}
	names := map[string]bool{}
	var tools []respTool
	type chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description json.RawMessage `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters,omitempty"`
			Strict      json.RawMessage `json:"strict,omitempty"`
		} `json:"function"`
	}
	var chat []chatTool
	for i, it := range items {
		t, aerr := parseTool(i, it)
		if aerr != nil {
			return "", nil, nil, aerr
		}
		if names[t.Name] {
			return "", nil, nil, badRequest("tools", "tools[%d].name: %q is offered twice", i, t.Name)
		}
		names[t.Name] = true
		tools = append(tools, t)
		var c chatTool
		c.Type, c.Function.Name, c.Function.Description, c.Function.Parameters, c.Function.Strict = "function", t.Name, t.Description, t.Parameters, t.Strict
		chat = append(chat, c)
	}
	if len(tools) == 0 {
		return "", nil, []respTool{}, nil
	}
	text, _ := json.Marshal(chat)
	return string(text), names, tools, nil
}

// parseTool reads tools[i], a function tool.
func parseTool(i int, it map[string]json.RawMessage) (respTool, *apiError) {
	var t respTool
	if json.Unmarshal(it["type"], &t.Type) != nil || t.Type != "function" {
		return t, badRequest("tools", "tools[%d].type: vigil serves function tools only ({\"type\": \"function\", ...}), got %s", i, clip(it["type"]))
	}
	for _, k := range slices.Sorted(maps.Keys(it)) {
		v := it[k]
		switch k {
		case "type", "name", "description", "parameters", "strict":
		default:
			if ok, known := respToolNeutral[k]; !known || !isNull(v) && !ok(v) {
				return t, badRequest("tools", "tools[%d].%s: vigil cannot honour %s; omit it", i, k, clip(v))
			}
		}
	}
	if json.Unmarshal(it["name"], &t.Name) != nil || t.Name == "" {
		return t, badRequest("tools", "tools[%d].name: want the function's name, a non-empty string", i)
	}
	var desc *string
	var strict *bool
	if json.Unmarshal(nullIfAbsent(it["description"]), &desc) != nil {
		return t, badRequest("tools", "tools[%d].description: want a string", i)
	}
	if json.Unmarshal(nullIfAbsent(it["strict"]), &strict) != nil {
		return t, badRequest("tools", "tools[%d].strict: want a boolean", i)
	}
	if p := bytes.TrimSpace(it["parameters"]); !isNull(p) && p[0] != '{' {
		return t, badRequest("tools", "tools[%d].parameters: want a JSON Schema object, got %s", i, clip(p))
	}
	t.Description, t.Parameters, t.Strict = compactOrNil(it["description"]), compactOrNil(it["parameters"]), compactOrNil(it["strict"])
	return t, nil
}

func nullIfAbsent(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// compactOrNil is raw compacted, nil when absent or null.
func compactOrNil(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// parseToolChoice reads tool_choice: "none", "auto", "required", or
// {"type": "function", "name"} naming an offered tool; nil when absent.
func parseToolChoice(raw json.RawMessage, names map[string]bool) (*workerv1.ToolChoice, *apiError) {
	const want = `want "none", "auto", "required" or {"type": "function", "name": ...}`
	if isNull(raw) {
		return nil, nil
	}
	mode := func(m workerv1.ToolChoiceMode) *workerv1.ToolChoice {
		return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: m}}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none":
			return mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE), nil
		case "auto":
			return mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO), nil
		case "required":
			if len(names) == 0 {
				return nil, badRequest("tool_choice", `tool_choice: "required" needs tools; offer function tools or omit it`)
			}
			return mode(workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED), nil
		}
		return nil, badRequest("tool_choice", "tool_choice: %s, got %q", want, s)
	}
	var f struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return nil, badRequest("tool_choice", "tool_choice: %s, got %s", want, clip(raw))
	}
	if f.Type != "function" {
		return nil, badRequest("tool_choice", "tool_choice.type: vigil serves function tools only (%s), got %q", want, f.Type)
	}
	if !names[f.Name] {
		return nil, badRequest("tool_choice", "tool_choice.name: %q is not a function of tools", f.Name)
	}
	return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Function{Function: f.Name}}, nil
}

// setTools maps tools, tool_choice and parallel_tool_calls onto req's
// messages, and checks max_tool_calls: it bounds calls to built-in tools
// (OpenAI's ResponseCreateParams), of which vigil serves none, so any
// count is honoured. Without tools, parallel_tool_calls asks nothing.
func (c *responsesRequest) setTools(req *workerv1.GenerateRequest) *apiError {
	text, names, tools, aerr := parseTools(c.Tools)
	if aerr != nil {
		return aerr
	}
	c.toolsEcho = tools
	choice, aerr := parseToolChoice(c.ToolChoice, names)
	if aerr != nil {
		return aerr
	}
	if m := c.MaxToolCalls; m != nil && *m < 0 {
		return badRequest("max_tool_calls", "max_tool_calls: want a non-negative integer, got %d", *m)
	}
	msgs := req.GetMessages()
	if text == "" {
		return nil
	}
	msgs.Tools, msgs.ToolChoice, msgs.ParallelToolCalls = text, choice, c.ParallelToolCalls
	return nil
}

// turns gathers input items into chat turns as chat would have them:
// consecutive function calls, and the assistant message before them,
// are one assistant turn, and a reasoning item's text is the
// reasoning_content of the assistant turn that follows it (a reasoning
// item with no assistant turn after it is not sent: chat has no place
// for it).
type turns struct {
	msgs []*workerv1.Message
	// open is the assistant turn that function calls join, nil after any
	// other item.
	open *workerv1.Message
	// thought is reasoning waiting for its assistant turn.
	thought []string
}

// message adds a message item's turn.
func (t *turns) message(m *workerv1.Message) {
	t.open = nil
	if m.Role == "assistant" {
		m.ReasoningContent = t.takeThought()
		t.open = m
	}
	t.msgs = append(t.msgs, m)
}

// call adds a function call to the open assistant turn, or a new one.
func (t *turns) call(tc *workerv1.ToolCall) {
	if t.open == nil {
		t.open = &workerv1.Message{Role: "assistant", ReasoningContent: t.takeThought()}
		t.msgs = append(t.msgs, t.open)
	}
	t.open.ToolCalls = append(t.open.ToolCalls, tc)
}

// think adds reasoning for the next assistant turn; it ends the open one.
func (t *turns) think(text string) {
	t.open = nil
	if text != "" {
		t.thought = append(t.thought, text)
	}
}

func (t *turns) takeThought() string {
	s := strings.Join(t.thought, "\n")
	t.thought = nil
	return s
}

// functionCall reads a function_call item {call_id, name, arguments, id,
// status}: a call of an earlier answer's, replayed.
func functionCall(i int, it map[string]json.RawMessage) (*workerv1.ToolCall, *apiError) {
	for _, k := range slices.Sorted(maps.Keys(it)) {
		switch k {
		case "type", "call_id", "name", "arguments", "id", "status":
		default:
			return nil, badRequest("input", "input[%d].%s: not a field of a function_call item vigil takes (call_id, name, arguments, id, status)", i, k)
		}
	}
	tc := &workerv1.ToolCall{Type: "function"}
	for _, f := range []struct {
		key string
		v   *string
	}{{"call_id", &tc.Id}, {"name", &tc.Name}, {"arguments", &tc.Arguments}} {
		if json.Unmarshal(it[f.key], f.v) != nil || *f.v == "" && f.key != "arguments" {
			return nil, badRequest(fmt.Sprintf("input[%d].%s", i, f.key), "input[%d].%s: want a string (a function_call has call_id, name and arguments)", i, f.key)
		}
	}
	return tc, nil
}

// functionCallOutput reads a function_call_output item {call_id, output,
// id, status}: output a string or input_text parts (joined by newlines);
// it becomes a tool turn answering call_id.
func functionCallOutput(i int, it map[string]json.RawMessage) (*workerv1.Message, *apiError) {
	for _, k := range slices.Sorted(maps.Keys(it)) {
		switch k {
		case "type", "call_id", "output", "id", "status":
		default:
			return nil, badRequest("input", "input[%d].%s: not a field of a function_call_output item vigil takes (call_id, output, id, status)", i, k)
		}
	}
	m := &workerv1.Message{Role: "tool"}
	if json.Unmarshal(it["call_id"], &m.ToolCallId) != nil || m.ToolCallId == "" {
		return nil, badRequest(fmt.Sprintf("input[%d].call_id", i), "input[%d].call_id: want the id of the call this answers, a string", i)
	}
	raw := bytes.TrimSpace(it["output"])
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &m.Content) == nil {
			return m, nil
		}
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if isNull(raw) || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return nil, badRequest(fmt.Sprintf("input[%d].output", i), "input[%d].output: want a string or a list of input_text parts", i)
	}
	var texts []string
	for j, p := range parts {
		if p.Type != "input_text" || p.Text == nil {
			return nil, badRequest(fmt.Sprintf("input[%d].output", i), `input[%d].output[%d]: vigil takes text parts only ({"type": "input_text", "text": ...}), got type %q`, i, j, p.Type)
		}
		texts = append(texts, *p.Text)
	}
	m.Content = strings.Join(texts, "\n")
	return m, nil
}

// reasoningItem reads a reasoning item's text: its reasoning_text
// content, else its summary's text (OpenAI's models give summaries only;
// vigil's answers give both, the same text). encrypted_content, which
// only OpenAI can read, is refused.
func reasoningItem(i int, it map[string]json.RawMessage) (string, *apiError) {
	for _, k := range slices.Sorted(maps.Keys(it)) {
		switch k {
		case "type", "id", "summary", "content", "status":
		case "encrypted_content":
			if !isNull(it[k]) {
				return "", badRequest(fmt.Sprintf("input[%d].encrypted_content", i), "input[%d].encrypted_content: only OpenAI reads its encrypted reasoning; send the reasoning's text as content or summary", i)
			}
		default:
			return "", badRequest("input", "input[%d].%s: not a field of a reasoning item (id, summary, content, encrypted_content, status)", i, k)
		}
	}
	var parts struct {
		Summary []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"summary"`
		Content []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
	}
	b, _ := json.Marshal(it)
	if json.Unmarshal(b, &parts) != nil {
		return "", badRequest("input", "input[%d]: a reasoning item's summary and content are lists of {type, text} parts", i)
	}
	var content, summary []string
	for j, p := range parts.Content {
		if p.Type != "reasoning_text" || p.Text == nil {
			return "", badRequest("input", `input[%d].content[%d]: want {"type": "reasoning_text", "text": ...}, got type %q`, i, j, p.Type)
		}
		content = append(content, *p.Text)
	}
	for j, p := range parts.Summary {
		if p.Type != "summary_text" || p.Text == nil {
			return "", badRequest("input", `input[%d].summary[%d]: want {"type": "summary_text", "text": ...}, got type %q`, i, j, p.Type)
		}
		summary = append(summary, *p.Text)
	}
	if len(content) > 0 {
		return strings.Join(content, "\n"), nil
	}
	return strings.Join(summary, "\n"), nil
}
