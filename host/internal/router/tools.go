package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// Tool calling (issue 27): the router checks tools, tool_choice and the
// replayed calls and passes them on; the worker renders them with the
// chat template, parses the calls out of the output and enforces
// tool_choice and parallel_tool_calls. Shapes after OpenAI's
// chat/completions reference and vLLM's server
// (vllm/entrypoints/openai/protocol.py, ChatCompletionToolsParam).

// maxTools is the most tools a request may offer: OpenAI's limit.
const maxTools = 128

// toolNameRE is OpenAI's pattern of a function's name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkFunction checks fn, a function tool's definition at field
// (chat's tools[i].function; the Responses API's tools[i], which holds
// type beside them: skip names such keys the caller checks itself) and
// returns its name: name (OpenAI's pattern), description (a string),
// parameters (a JSON Schema object), strict (a boolean). Other keys get
// 400, as OpenAI answers them.
func checkFunction(field string, fn map[string]json.RawMessage, skip ...string) (string, *apiError) {
	var name string
	if json.Unmarshal(fn["name"], &name) != nil || !toolNameRE.MatchString(name) {
		return "", badRequest(field+".name", "%s.name: want a string of 1 to 64 letters, digits, _ or -, got %s", field, clipOr(fn["name"], "none"))
	}
	for _, k := range slices.Sorted(maps.Keys(fn)) {
		v := bytes.TrimSpace(fn[k])
		switch {
		case k == "name" || slices.Contains(skip, k) || isNull(v):
		case k == "description":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return "", badRequest(field+".description", "%s.description: want a string, got %s", field, clip(v))
			}
		case k == "parameters":
			if v[0] != '{' || !json.Valid(v) {
				return "", badRequest(field+".parameters", "%s.parameters: want a JSON Schema object, got %s", field, clip(v))
			}
		case k == "strict":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return "", badRequest(field+".strict", "%s.strict: want a boolean, got %s", field, clip(v))
			}
		default:
			return "", badRequest(field+"."+k, "%s.%s: not a field of a function tool (name, description, parameters, strict)", field, k)
		}
	}
	return name, nil
}

// clipOr is clip(raw), or none when raw is absent.
func clipOr(raw json.RawMessage, none string) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return none
	}
	return clip(raw)
}

// checkToolCount checks the number of tools offered.
func checkToolCount(n int) *apiError {
	if n > maxTools {
		return badRequest("tools", "tools: %d tools; at most %d", n, maxTools)
	}
	return nil
}

// parseChatTools reads chat's tools, an array of {"type": "function",
// "function": {...}}: the functions' names in order, and the array as
// compact JSON text for Messages.tools (keys in the client's order, as
// the template gets them); "" for null or [].
func parseChatTools(raw json.RawMessage) (names []string, text string, aerr *apiError) {
	if isNull(raw) {
		return nil, "", nil
	}
	var elems []map[string]json.RawMessage
	if bytes.TrimSpace(raw)[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, "", badRequest("tools", `tools: want an array of {"type": "function", "function": {"name": ...}}`)
	}
	if len(elems) == 0 {
		return nil, "", nil
	}
	if aerr := checkToolCount(len(elems)); aerr != nil {
		return nil, "", aerr
	}
	for i, e := range elems {
		field := fmt.Sprintf("tools[%d]", i)
		var typ string
		if json.Unmarshal(e["type"], &typ) != nil || typ != "function" {
			return nil, "", badRequest(field+".type", `%s.type: want "function" (vigil takes function tools only), got %s`, field, clipOr(e["type"], "none"))
		}
		for k := range e {
			if k != "type" && k != "function" {
				return nil, "", badRequest(field+"."+k, "%s.%s: not a field of a tool (type, function)", field, k)
			}
		}
		var fn map[string]json.RawMessage
		if json.Unmarshal(e["function"], &fn) != nil || fn == nil {
			return nil, "", badRequest(field+".function", `%s.function: want an object such as {"name": "get_weather", "parameters": {...}}`, field)
		}
		name, aerr := checkFunction(field+".function", fn)
		if aerr != nil {
			return nil, "", aerr
		}
		if aerr := offeredOnce(names, name, field+".function.name"); aerr != nil {
			return nil, "", aerr
		}
		names = append(names, name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, "", badRequest("tools", "tools: %v", err)
	}
	return names, buf.String(), nil
}

// offeredOnce refuses a function name offered before: the worker could
// not tell the two apart in a call.
func offeredOnce(names []string, name, field string) *apiError {
	if slices.Contains(names, name) {
		return badRequest(field, "%s: the function %q is offered twice; give each tool its own name", field, name)
	}
	return nil
}

// toolChoiceOf maps a tool_choice onto the worker API: a named
// function (function not "", which must be among names, the tools
// offered), else mode, "none", "auto" or "required"; field names it in
// errors. Without tools only "none" passes (and sets nothing), as
// OpenAI refuses the others.
func toolChoiceOf(field, mode, function string, names []string) (*workerv1.ToolChoice, *apiError) {
	if len(names) == 0 && (mode != "none" || function != "") {
		return nil, badRequest(field, "%s: only allowed when tools are specified; send tools or omit %s", field, field)
	}
	if function != "" {
		if !slices.Contains(names, function) {
			return nil, badRequest(field, "%s: the function %q is not among tools (%s)", field, clipStr(function), clipStr(strings.Join(names, ", ")))
		}
		return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Function{Function: function}}, nil
	}
	switch mode {
	case "none":
		if len(names) == 0 {
			return nil, nil
		}
		return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}}, nil
	case "auto":
		return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO}}, nil
	case "required":
		return &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}, nil
	}
	return nil, badRequest(field, `%s: want "none", "auto", "required" or a function, got %q`, field, clipStr(mode))
}

// parseChatToolChoice reads chat's tool_choice: "none", "auto",
// "required" or {"type": "function", "function": {"name": N}}; nil when
// null.
func parseChatToolChoice(raw json.RawMessage, names []string) (*workerv1.ToolChoice, *apiError) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		return toolChoiceOf("tool_choice", mode, "", names)
	}
	var named struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Function == nil || named.Function.Name == "" {
		return nil, badRequest("tool_choice", `tool_choice: want "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, got %s`, clip(raw))
	}
	return toolChoiceOf("tool_choice", "", named.Function.Name, names)
}

// setChatTools maps chat's tools, tool_choice and parallel_tool_calls
// onto msgs. parallel_tool_calls without tools has nothing to say and
// is not sent.
func setChatTools(msgs *workerv1.Messages, tools, choice json.RawMessage, parallel *bool) *apiError {
	names, text, aerr := parseChatTools(tools)
	if aerr != nil {
		return aerr
	}
	tc, aerr := parseChatToolChoice(choice, names)
	if aerr != nil {
		return aerr
	}
	msgs.Tools, msgs.ToolChoice = text, tc
	if text != "" {
		msgs.ParallelToolCalls = parallel
	}
	return nil
}

// toolArguments checks a replayed call's arguments at field (param the
// request field a 400 names: messages, or the Responses API's input),
// JSON text the worker parses to an object for the template (as
// transformers takes them): "" is {} (vLLM's chat_utils does the same),
// anything else must be JSON.
func toolArguments(param, field, args string) (string, *apiError) {
	if strings.TrimSpace(args) == "" {
		return "{}", nil
	}
	if !json.Valid([]byte(args)) {
		return "", badRequest(param, "%s: want the call's arguments as JSON text, got %s", field, clipStr(args))
	}
	return args, nil
}

// toolCallIn is a replayed tool call of an assistant message, as OpenAI
// returned it; other keys (a stream accumulator's index) are ignored.
type toolCallIn struct {
	ID       string  `json:"id"`
	Type     *string `json:"type"`
	Function *struct {
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

// parseToolCalls reads message i's tool_calls, [{id, type: "function",
// function: {name, arguments}}].
func parseToolCalls(i int, raw json.RawMessage) ([]*workerv1.ToolCall, *apiError) {
	var in []toolCallIn
	if json.Unmarshal(raw, &in) != nil {
		return nil, badRequest("messages", `messages[%d].tool_calls: want an array of {"id": ..., "type": "function", "function": {"name": ..., "arguments": "..."}}`, i)
	}
	calls := make([]*workerv1.ToolCall, 0, len(in))
	for j, c := range in {
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		switch {
		case c.ID == "":
			return nil, badRequest("messages", "%s.id: required (the id the tool message answering it repeats)", field)
		case c.Type != nil && *c.Type != "function":
			return nil, badRequest("messages", `%s.type: want "function", got %q`, field, clipStr(*c.Type))
		case c.Function == nil || c.Function.Name == "":
			return nil, badRequest("messages", "%s.function.name: required", field)
		}
		var args string
		if c.Function.Arguments != nil {
			args = *c.Function.Arguments
		}
		args, aerr := toolArguments("messages", field+".function.arguments", args)
		if aerr != nil {
			return nil, aerr
		}
		calls = append(calls, &workerv1.ToolCall{Id: c.ID, Type: "function", Name: c.Function.Name, Arguments: args})
	}
	return calls, nil
}

// usesTools reports whether msgs need a worker that takes tools: tools
// offered (even with tool_choice none: the template must still take the
// turns), or a turn holding calls or answering one.
func usesTools(msgs *workerv1.Messages) bool {
	if msgs.GetTools() != "" {
		return true
	}
	for _, m := range msgs.GetMessages() {
		if len(m.GetToolCalls()) > 0 || m.GetToolCallId() != "" || m.GetRole() == "tool" {
			return true
		}
	}
	return false
}
