package outparse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The JSON schemas vLLM's server constrains the output with for
// tool_choice "required" and a named function, built the same way so a
// model sees the same grammar through vigil. Source: vLLM's
// vllm/entrypoints/openai/protocol.py,
// ChatCompletionRequest._get_guided_json_from_tool.

// tool is one entry of OpenAI chat tools JSON.
type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// member is one key of a JSON object, in the order written: a schema's
// "properties" order is the order grammars generate them in, so the
// parameters are never re-encoded through a map.
type member struct {
	key   string
	value json.RawMessage
}

// RequiredSchema returns the schema of tool_choice "required": an array
// of at least one {"name", "parameters"} object, one anyOf branch per
// tool, its name an enum of one and its parameters the tool's schema
// ({"type":"object","properties":{}} when it has none). Each tool's
// "$defs" are hoisted to the top, as vLLM does; two tools defining one
// name differently is an error.
func RequiredSchema(toolsJSON string) (string, error) {
	tools, err := readTools(toolsJSON)
	if err != nil {
		return "", err
	}
	if len(tools) == 0 {
		return "", fmt.Errorf("tools: none given; tool_choice %q needs at least one", ChoiceRequired)
	}
	var b strings.Builder
	var defs []member
	b.WriteString(`{"type":"array","minItems":1,"items":{"type":"object","anyOf":[`)
	for i, t := range tools {
		params, err := parameters(t.Function.Parameters, i)
		if err != nil {
			return "", err
		}
		if len(params) == 0 { // vLLM's schema of "no parameters"
			params = []member{{"type", json.RawMessage(`"object"`)}, {"properties", json.RawMessage(`{}`)}}
		}
		if defs, err = hoistDefs(params, defs, i); err != nil {
			return "", err
		}
		name, _ := json.Marshal(t.Function.Name)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"properties":{"name":{"type":"string","enum":[%s]},"parameters":%s},"required":["name","parameters"]}`,
			name, writeObject(dropKey(params, "$defs")))
	}
	b.WriteString(`]}`)
	if len(defs) > 0 {
		b.WriteString(`,"$defs":` + writeObject(defs))
	}
	b.WriteByte('}')
	return b.String(), nil
}

// NamedSchema returns the schema of tool_choice naming a function: the
// function's parameters schema as given ({"type":"object"} when it has
// none), since the output is its arguments object.
func NamedSchema(toolsJSON, name string) (string, error) {
	tools, err := readTools(toolsJSON)
	if err != nil {
		return "", err
	}
	for i, t := range tools {
		if t.Function.Name != name {
			continue
		}
		params, err := parameters(t.Function.Parameters, i)
		if err != nil {
			return "", err
		}
		if len(params) == 0 {
			return `{"type":"object"}`, nil
		}
		return writeObject(params), nil
	}
	return "", fmt.Errorf("tool_choice: function %q is not among the tools", name)
}

// readTools reads OpenAI chat tools JSON and checks each is a named
// function.
func readTools(toolsJSON string) ([]tool, error) {
	var tools []tool
	if err := json.Unmarshal([]byte(toolsJSON), &tools); err != nil {
		return nil, fmt.Errorf("tools: not an array of tools: %v", err)
	}
	for i, t := range tools {
		if t.Type != "function" {
			return nil, fmt.Errorf("tools[%d].type: %q is not a tool type here; want \"function\"", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, fmt.Errorf("tools[%d].function.name: empty; a function needs a name", i)
		}
	}
	return tools, nil
}

// parameters returns a tool's parameters schema's members, in order;
// none for absent, null or {}.
func parameters(raw json.RawMessage, i int) ([]member, error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		s = []byte("{}")
	}
	ms, err := readObject(s)
	if err != nil {
		return nil, fmt.Errorf("tools[%d].function.parameters: not a JSON schema object: %v", i, err)
	}
	return ms, nil
}

// hoistDefs adds params' "$defs" to defs; a name defined twice must be
// defined the same.
func hoistDefs(params, defs []member, i int) ([]member, error) {
	for _, m := range params {
		if m.key != "$defs" {
			continue
		}
		ds, err := readObject(m.value)
		if err != nil {
			return nil, fmt.Errorf("tools[%d].function.parameters.$defs: not an object: %v", i, err)
		}
		for _, d := range ds {
			if at := find(defs, d.key); at >= 0 {
				if !sameJSON(defs[at].value, d.value) {
					return nil, fmt.Errorf("tools[%d].function.parameters.$defs.%s: defined differently by another tool; tool_choice %q needs one definition", i, d.key, ChoiceRequired)
				}
				continue
			}
			defs = append(defs, d)
		}
	}
	return defs, nil
}

// readObject reads a JSON object's members in order.
func readObject(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	var ms []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("text after the object")
	}
	return ms, nil
}

func writeObject(ms []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		var v bytes.Buffer
		if json.Compact(&v, m.value) != nil {
			v.Write(m.value)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v.Bytes())
	}
	b.WriteByte('}')
	return b.String()
}

func dropKey(ms []member, key string) []member {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

func find(ms []member, key string) int {
	for i, m := range ms {
		if m.key == key {
			return i
		}
	}
	return -1
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
