package tokenizer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The wanted renderings are Python's repr of what vLLM's server hands the
// template (scripts/tokenizer-fixtures/render.py's vllm_message and
// vllm_tools): keys in that order, arguments parsed, None for a missing
// description.
func TestToolsReachTheTemplate(t *testing.T) {
	t.Parallel()
	tok := templated(t, "{% for m in messages %}{{ m }}\n{% endfor %}{{ tools }}")
	msgs := []Message{
		{Role: "assistant", Content: "", ReasoningContent: "think", ToolCalls: []ToolCall{
			{ID: "c1", Name: "f", Arguments: `{"b": [1, 2.5], "a": {"x": null}}`},
			{ID: "c2", Type: "function", Name: "g", Arguments: ""},
		}},
		{Role: "tool", Content: "20", ToolCallID: "c1"},
		{Role: "tool", Content: "ok"},
		{Role: "assistant", Content: "done", ToolCalls: []ToolCall{}},
	}
	tools := `[{"function": {"parameters": {"type": "object", "b": 1, "a": true}, "name": "f", "strict": false}, "type": "function"},
		{"function": {"name": "g", "description": "G."}, "x": 1}]`
	got, err := tok.RenderChatWith(msgs, ChatOptions{Tools: tools})
	want := `{'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': {'b': [1, 2.5], 'a': {'x': None}}}}, {'id': 'c2', 'type': 'function', 'function': {'name': 'g', 'arguments': {}}}], 'reasoning_content': 'think'}
{'role': 'tool', 'content': '20', 'tool_call_id': 'c1'}
{'role': 'tool', 'content': 'ok'}
{'role': 'assistant', 'content': 'done'}
[{'type': 'function', 'function': {'name': 'f', 'description': None, 'parameters': {'type': 'object', 'b': 1, 'a': True}, 'strict': False}}, {'type': 'function', 'function': {'name': 'g', 'description': 'G.', 'parameters': None}, 'x': 1}]`
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenderChatWith (-want +got):\n%s", diff)
	}
}

func TestToolsNone(t *testing.T) {
	t.Parallel()
	tok := templated(t, "{{ tools }}")
	for _, tools := range []string{"", " ", "[]", " [ ] "} {
		if got, err := tok.RenderChatWith(nil, ChatOptions{Tools: tools}); err != nil || got != "None" {
			t.Errorf("Tools %q: RenderChatWith = %q, %v; want None", tools, got, err)
		}
	}
}

// Bad tools and arguments are refused before rendering, naming the field
// as OpenAI's request does.
func TestToolInputErrors(t *testing.T) {
	t.Parallel()
	tok := templated(t, "x")
	call := func(args string) []Message {
		return []Message{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []ToolCall{{Name: "ok", Arguments: "{}"}, {Name: "f", Arguments: args}}}}
	}
	const argsField = "messages[1].tool_calls[1].function.arguments"
	for name, c := range map[string]struct {
		msgs  []Message
		tools string
		field string
	}{
		"arguments a list":     {msgs: call("[1]"), field: argsField},
		"arguments a string":   {msgs: call(`"x"`), field: argsField},
		"arguments cut":        {msgs: call(`{"a": 1`), field: argsField},
		"arguments then more":  {msgs: call(`{} {}`), field: argsField},
		"arguments null":       {msgs: call("null"), field: argsField},
		"tools an object":      {tools: `{"type": "function"}`, field: "tools"},
		"tools not JSON":       {tools: `[{"function": {"name": "f"}}`, field: "tools"},
		"tools then more":      {tools: `[] []`, field: "tools"},
		"tool a number":        {tools: `[1]`, field: "tools[0]"},
		"tool without fn":      {tools: `[{"function": {"name": "f"}}, {"type": "function"}]`, field: "tools[1].function"},
		"tool of another type": {tools: `[{"type": "custom", "function": {"name": "f"}}]`, field: "tools[0].type"},
		"function a string":    {tools: `[{"function": "f"}]`, field: "tools[0].function"},
		"function unnamed":     {tools: `[{"function": {"parameters": {}}}]`, field: "tools[0].function.name"},
		"name empty":           {tools: `[{"function": {"name": ""}}]`, field: "tools[0].function.name"},
		"name a number":        {tools: `[{"function": {"name": 1}}]`, field: "tools[0].function.name"},
		"description a list":   {tools: `[{"function": {"name": "f", "description": []}}]`, field: "tools[0].function.description"},
		"parameters a list":    {tools: `[{"function": {"name": "f", "parameters": []}}]`, field: "tools[0].function.parameters"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := tok.RenderChatWith(c.msgs, ChatOptions{Tools: c.tools})
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != c.field {
				t.Errorf("RenderChatWith = %v; want an *InputError naming %s", err, c.field)
			}
		})
	}
}

// ToolCall's JSON is OpenAI's, both ways.
func TestToolCallJSON(t *testing.T) {
	t.Parallel()
	const wire = `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}],"reasoning_content":"r"}`
	var m Message
	if err := json.Unmarshal([]byte(wire), &m); err != nil {
		t.Fatal(err)
	}
	want := Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Name: "f", Arguments: `{"a":1}`}}, ReasoningContent: "r"}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Unmarshal (-want +got):\n%s", diff)
	}
	if b, err := json.Marshal(m); err != nil || string(b) != wire {
		t.Errorf("Marshal = %s, %v; want %s", b, err, wire)
	}
}

// The special tokens a tool-call parser needs in the text are found by
// their content; ordinary vocabulary entries are not special.
func TestSpecialTokenIDAndTemplateSource(t *testing.T) {
	tok, err := Load("testdata/models/qwen3", "")
	if err != nil {
		t.Skip(err)
	}
	if id, ok := tok.SpecialTokenID("<|im_end|>"); !ok || id != 151645 {
		t.Errorf("SpecialTokenID(<|im_end|>) = %d, %v; want 151645, true", id, ok)
	}
	// <tool_call> is an added token Qwen3 does not mark special.
	for _, s := range []string{"<tool_call>", "hello", "<|no such token|>", ""} {
		if id, ok := tok.SpecialTokenID(s); ok {
			t.Errorf("SpecialTokenID(%q) = %d, true; want false", s, id)
		}
	}
	if src := tok.TemplateSource(); !strings.Contains(src, "<tool_call>") {
		t.Errorf("TemplateSource() = %.80q...; want Qwen3's template", src)
	}
	if src := templated(t, "{{ 1 }}").TemplateSource(); src != "{{ 1 }}" {
		t.Errorf("TemplateSource() of a template file = %q", src)
	}
}
