package outparse

import (
	"encoding/json"
	"strings"
)

// space is the JSON whitespace, which the JSON-based formats allow
// around their values.
const space = " \t\r\n"

// jsonScan finds where a JSON object or array ends in text that grows:
// it counts brackets outside strings and keeps its place, so each byte
// is read once however the text is fed. It does not check the JSON (the
// call's check does): it only tells where the value would close.
type jsonScan struct {
	pos, depth int
	inStr, esc bool
}

// end returns the length of the value that begins s (s[0] is '{' or
// '['), or -1 while it is not closed. s must be the same text as at
// the last call, grown.
func (j *jsonScan) end(s string) int {
	for ; j.pos < len(s); j.pos++ {
		c := s[j.pos]
		switch {
		case j.esc:
			j.esc = false
		case j.inStr:
			j.esc = c == '\\'
			j.inStr = c != '"'
		case c == '"':
			j.inStr = true
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			if j.depth <= 0 {
				j.pos++
				return j.pos
			}
		}
	}
	return -1
}

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

// isCallObject reports whether obj is a JSON object with a "name" key:
// one without is a JSON answer, not a call (llama3_json reads any JSON
// object at the start of the output).
func isCallObject(obj string) bool {
	var v callObject
	err := json.Unmarshal([]byte(obj), &v)
	return err != nil || v.Name != nil
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
