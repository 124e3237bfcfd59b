package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vigilhq/vigil/host/internal/jinja"
)

// ToolCall is one function call of an assistant turn, as OpenAI's
// message.tool_calls[i] holds it.
type ToolCall struct {
	// ID is the call's id, which the tool turn answering it repeats.
	ID string
	// Type is "function" (the only one); "" is taken as "function".
	Type string
	// Name is the function's name.
	Name string
	// Arguments is the JSON text the model wrote: an object, or "" for
	// none ({} to the template, as vLLM gives it).
	Arguments string
}

// wireToolCall is ToolCall in OpenAI's shape.
type wireToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// MarshalJSON writes c in OpenAI's shape: {"id", "type", "function":
// {"name", "arguments"}}.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	w := wireToolCall{ID: c.ID, Type: c.Type}
	w.Function.Name, w.Function.Arguments = c.Name, c.Arguments
	return json.Marshal(w)
}

// UnmarshalJSON reads OpenAI's shape, as MarshalJSON writes it.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var w wireToolCall
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = ToolCall{ID: w.ID, Type: w.Type, Name: w.Function.Name, Arguments: w.Function.Arguments}
	return nil
}

// InputError refuses a chat input before rendering; Field names it as
// OpenAI's request does (tools[0].function.name,
// messages[2].tool_calls[0].function.arguments).
type InputError struct{ Field, Reason string }

func (e *InputError) Error() string { return e.Field + ": " + e.Reason }

// messageDict is message i as vLLM's server hands it to the template
// (vllm/entrypoints/chat_utils.py, _parse_chat_message_content and
// _postprocess_messages): role, content, then the keys that are set, in
// the order name, tool_calls, tool_call_id, reasoning_content. A tool
// call's arguments are parsed from JSON text into an object ("" is {}).
func messageDict(i int, m Message) (*jinja.Dict, error) {
	d := jinja.NewDict()
	_ = d.Set("role", m.Role)
	_ = d.Set("content", m.Content)
	if m.Name != "" {
		_ = d.Set("name", m.Name)
	}
	if len(m.ToolCalls) > 0 { // vLLM drops an empty list
		calls := make([]any, len(m.ToolCalls))
		for j, c := range m.ToolCalls {
			args, err := argumentsValue(c.Arguments)
			if err != nil {
				return nil, &InputError{Field: fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), Reason: err.Error()}
			}
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			fn := jinja.NewDict()
			_ = fn.Set("name", c.Name)
			_ = fn.Set("arguments", args)
			call := jinja.NewDict()
			_ = call.Set("id", c.ID)
			_ = call.Set("type", typ)
			_ = call.Set("function", fn)
			calls[j] = call
		}
		_ = d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		_ = d.Set("tool_call_id", m.ToolCallID)
	}
	if m.ReasoningContent != "" {
		_ = d.Set("reasoning_content", m.ReasoningContent)
	}
	return d, nil
}

// argumentsValue is a call's arguments as the template sees them.
func argumentsValue(text string) (*jinja.Dict, error) {
	if text == "" {
		return jinja.NewDict(), nil
	}
	v, err := parseJSON(text)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	d, ok := v.(*jinja.Dict)
	if !ok {
		return nil, errors.New("want a JSON object")
	}
	return d, nil
}

// parseJSON reads text, one JSON value, as json.loads gives it to jinja2:
// objects keep their key order, integers stay integers.
func parseJSON(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := jsonValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("want one JSON value, found more after it")
	}
	return v, nil
}

// member is one key and value of a JSON object, in its order.
type member struct {
	key string
	val any
}

// jsonMembers reads an object's members after its '{', in their order,
// a repeated key keeping its first place and its last value (json.loads).
func jsonMembers(dec *json.Decoder) ([]member, error) {
	var out []member
	at := map[string]int{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		v, err := jsonValue(dec)
		if err != nil {
			return nil, err
		}
		if i, ok := at[k.(string)]; ok {
			out[i].val = v
			continue
		}
		at[k.(string)] = len(out)
		out = append(out, member{k.(string), v})
	}
	_, err := dec.Token()
	return out, err
}

// toolsValue is OpenAI's tools array (JSON text) as vLLM's server hands
// it to the template: each tool its pydantic model's model_dump()
// (vllm/entrypoints/openai/protocol.py, ChatCompletionToolsParam and
// FunctionDefinition): {"type": "function", "function": {"name",
// "description", "parameters", then any other keys as given}}, a missing
// description or parameters None; other keys of a tool follow function.
// "" is None.
func toolsValue(text string) (any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, &InputError{Field: "tools", Reason: "want a JSON array of tools"}
	}
	var out []any
	for i := 0; dec.More(); i++ {
		tool, err := toolValue(dec, i)
		if err != nil {
			return nil, err
		}
		out = append(out, tool)
	}
	if _, err := dec.Token(); err != nil {
		return nil, &InputError{Field: "tools", Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &InputError{Field: "tools", Reason: "want one JSON array, found more after it"}
	}
	if len(out) == 0 {
		return nil, nil // an empty list renders as none, as templates test "if tools"
	}
	return out, nil
}

// toolValue reads tools[i].
func toolValue(dec *json.Decoder, i int) (*jinja.Dict, error) {
	field := fmt.Sprintf("tools[%d]", i)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, &InputError{Field: field, Reason: "want an object {\"type\": \"function\", \"function\": {...}}"}
	}
	bad := func(err error) error {
		return &InputError{Field: field, Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	tool := jinja.NewDict()
	_ = tool.Set("type", "function")
	_ = tool.Set("function", nil)
	var fn *jinja.Dict
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		if k != "function" {
			v, err := jsonValue(dec)
			if err != nil {
				return nil, bad(err)
			}
			if k == "type" && v != "function" {
				return nil, &InputError{Field: field + ".type", Reason: "want \"function\" (the only tool type)"}
			}
			_ = tool.Set(k, v)
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, &InputError{Field: field + ".function", Reason: "want an object {\"name\": ..., \"parameters\": {...}}"}
		}
		ms, err := jsonMembers(dec)
		if err != nil {
			return nil, bad(err)
		}
		if fn, err = functionValue(ms, field+".function"); err != nil {
			return nil, err
		}
		_ = tool.Set("function", fn)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(err)
	}
	if fn == nil {
		return nil, &InputError{Field: field + ".function", Reason: "missing: want {\"name\": ..., \"parameters\": {...}}"}
	}
	return tool, nil
}

// functionValue is a tool's function as FunctionDefinition's model_dump:
// name, description, parameters, then the other members in their order.
func functionValue(ms []member, field string) (*jinja.Dict, error) {
	fn := jinja.NewDict()
	_ = fn.Set("name", nil)
	_ = fn.Set("description", nil)
	_ = fn.Set("parameters", nil)
	for _, m := range ms {
		switch _, isDict := m.val.(*jinja.Dict); {
		case m.key == "name":
			if s, ok := m.val.(string); !ok || s == "" {
				return nil, &InputError{Field: field + ".name", Reason: "want the function's name, a non-empty string"}
			}
		case m.key == "description":
			if _, ok := m.val.(string); m.val != nil && !ok {
				return nil, &InputError{Field: field + ".description", Reason: "want a string"}
			}
		case m.key == "parameters" && m.val != nil && !isDict:
			return nil, &InputError{Field: field + ".parameters", Reason: "want a JSON Schema object"}
		}
		_ = fn.Set(m.key, m.val)
	}
	if name, _ := fn.Get("name"); name == nil {
		return nil, &InputError{Field: field + ".name", Reason: "missing: want the function's name"}
	}
	return fn, nil
}
