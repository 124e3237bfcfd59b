package outparse

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ChoiceRequired is Options.Choice for tool_choice "required".
const ChoiceRequired = "required"

// tool is one entry of OpenAI's chat tools array.
type tool struct {
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func readTools(toolsJSON string) ([]tool, error) {
	var tools []tool
	if err := json.Unmarshal([]byte(toolsJSON), &tools); err != nil {
		return nil, fmt.Errorf("tools: want OpenAI's tools array: %v", err)
	}
	return tools, nil
}

// parameters is a tool's parameters schema, {"type":"object"} for none.
func (t tool) parameters() json.RawMessage {
	if len(bytes.TrimSpace(t.Function.Parameters)) == 0 || string(t.Function.Parameters) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return t.Function.Parameters
}

// RequiredSchema is the schema vLLM's server constrains the output to
// for tool_choice "required" (vllm/entrypoints/openai/protocol.py,
// _get_json_schema_from_tool): a non-empty array of {"name", "parameters"}
// objects, each the name of a tool offered and its parameters' schema.
func RequiredSchema(toolsJSON string) (string, error) {
	tools, err := readTools(toolsJSON)
	if err != nil {
		return "", err
	}
	anyOf := make([]any, len(tools))
	for i, t := range tools {
		anyOf[i] = map[string]any{
			"properties": map[string]any{
				"name":       map[string]any{"type": "string", "enum": []string{t.Function.Name}},
				"parameters": t.parameters(),
			},
			"required": []string{"name", "parameters"},
		}
	}
	b, err := json.Marshal(map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "object", "anyOf": anyOf}})
	return string(b), err
}

// NamedSchema is the schema for a named tool_choice, as vLLM's: the
// function's parameters (the output is the call's arguments alone).
func NamedSchema(toolsJSON, name string) (string, error) {
	tools, err := readTools(toolsJSON)
	if err != nil {
		return "", err
	}
	for _, t := range tools {
		if t.Function.Name == name {
			return string(t.parameters()), nil
		}
	}
	return "", fmt.Errorf("function %q is not among the tools offered", name)
}

// choiceCaller parses output constrained by RequiredSchema or
// NamedSchema: it holds the whole output, then reads it as vLLM's server
// does (the array of calls, or the named call's arguments).
type choiceCaller struct {
	name string // the named function; ChoiceRequired: the array
	buf  bytes.Buffer
}

func (c *choiceCaller) feed(text string) []piece {
	c.buf.WriteString(text)
	return nil
}

func (c *choiceCaller) finish() []piece {
	raw := c.buf.String()
	if c.name != ChoiceRequired {
		return []piece{{call: &call{name: c.name, arguments: raw, raw: raw}}}
	}
	var list []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal([]byte(raw), &list) != nil || len(list) == 0 {
		// Not a call: the core counts a call it cannot check.
		return []piece{{call: &call{raw: raw}}}
	}
	out := make([]piece, len(list))
	for i, l := range list {
		out[i] = piece{call: &call{name: l.Name, arguments: string(l.Parameters), raw: raw}}
	}
	return out
}
