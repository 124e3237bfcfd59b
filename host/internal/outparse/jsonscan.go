package outparse

import (
	"encoding/json"
	"strings"
)

// space is the JSON whitespace, which the JSON-based formats allow
// around their values.
const space = " \t\r\n"

// callObject is the object a JSON-based call is written as; models write
// its arguments under "arguments" (Hermes, Qwen) or "parameters"
// (Llama 3, vLLM's tool_choice "required").
type callObject struct {
	Name       *string         `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
}

// callOf reads a call written as a JSON object; raw is what goes out as
// content when it fails its check. A call that is not such an object
// gets no name, so its check fails.
func callOf(obj, raw string) *call {
	c := &call{raw: raw}
	var v callObject
	if json.Unmarshal([]byte(obj), &v) != nil || v.Name == nil {
		return c
	}
	if v.Arguments != nil && v.Parameters != nil {
		return c // both: which one the model meant is a guess
	}
	args := v.Arguments
	if args == nil {
		args = v.Parameters
	}
	c.name, c.arguments = *v.Name, argumentsText(args)
	return c
}

// argumentsText returns a call's arguments as JSON text: "" for none
// (or null), and the string's text when a model wrote the object as a
// JSON string (some do); the check then tells whether it is an object.
func argumentsText(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return ""
	}
	if s[0] == '"' {
		var inner string
		if json.Unmarshal(raw, &inner) == nil {
			return inner
		}
	}
	return s
}
