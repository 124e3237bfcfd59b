package outparse

import (
	"encoding/json"
	"strings"
	"testing"
)

var (
	required = Options{Functions: weather.Functions, Choice: ChoiceRequired}
	named    = Options{Functions: weather.Functions, Choice: "get_weather"}
)

// choiceCases are outputs under tool_choice "required" (vLLM's array of
// {name, parameters}) and a named function (its arguments object), read
// whatever the family parser is.
var choiceCases = []tcase{
	{name: "required one call", tool: "hermes", opts: required,
		out:  `[{"name": "get_weather", "parameters": {"city": "Paris"}}]`,
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
	{name: "required two calls, whitespace", tool: "llama3_json", opts: required,
		out:  " [\n  {\"name\": \"get_time\", \"parameters\": {}} ,\n  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"]\"}}\n]\n",
		want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}, {Name: "get_weather", Arguments: `{"city": "]"}`}}}},
	{name: "required without a family parser", tool: "none", opts: required,
		out: `[{"name": "get_time", "parameters": {}}]`, want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "required with reasoning first", reasoning: "qwen3", tool: "hermes", opts: required,
		out:  `<think>pick one</think>[{"name": "get_time", "parameters": {}}]`,
		want: Whole{Reasoning: "pick one", Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "required unknown function, counted", tool: "hermes", opts: required,
		out:  `[{"name": "nope", "parameters": {}}, {"name": "get_time", "parameters": {}}]`,
		want: Whole{Content: `{"name": "nope", "parameters": {}}`, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
	{name: "required unclosed array takes its calls", tool: "hermes", opts: required,
		out: `[{"name": "get_time", "parameters": {}}, `, want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "required unclosed element, counted", tool: "hermes", opts: required,
		out: `[{"name": "get_time", "parameters": {`, want: Whole{Content: `{"name": "get_time", "parameters": {`, Failures: 1}},
	{name: "required not an array, counted", tool: "hermes", opts: required,
		out: "I can't do that.", want: Whole{Content: "I can't do that.", Failures: 1}},
	{name: "required broken shape, rest is content", tool: "hermes", opts: required,
		out:  `[{"name": "get_time", "parameters": {}} {"name": "get_time"}]`,
		want: Whole{Content: ` {"name": "get_time"}]`, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
	{name: "required with arguments keys", tool: "hermes", opts: required,
		out: `[{"name": "get_time", "arguments": {"tz": "ß"}}]`, want: Whole{Calls: []Call{{Name: "get_time", Arguments: `{"tz": "ß"}`}}}},
	{name: "named after reasoning", reasoning: "deepseek_r1", tool: "hermes", opts: named,
		out: `hmm</think>{"city": "Oslo"}`, want: Whole{Reasoning: "hmm", Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}}},
	{name: "required empty array", tool: "hermes", opts: required, out: "[ ]", want: Whole{}},
	{name: "named arguments object", tool: "hermes", opts: named,
		out: `{"city": "Paris", "unit": "C"}`, want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Paris", "unit": "C"}`}}}},
	{name: "named with whitespace around", tool: "llama3_json", opts: named,
		out: "\n {\"city\": \"{\\\"x\"}\n\n", want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "{\"x"}`}}}},
	{name: "named text after the object is content", tool: "hermes", opts: named,
		out: `{} ok`, want: Whole{Content: " ok", Calls: []Call{{Name: "get_weather", Arguments: "{}"}}}},
	{name: "named malformed, counted", tool: "hermes", opts: named,
		out: `{"city": Paris}`, want: Whole{Content: `{"city": Paris}`, Failures: 1}},
	{name: "named unclosed, counted", tool: "hermes", opts: named,
		out: `{"city": "Par`, want: Whole{Content: `{"city": "Par`, Failures: 1}},
	{name: "named not an object, counted", tool: "hermes", opts: named,
		out: `Paris`, want: Whole{Content: `Paris`, Failures: 1}},
}

func TestChoice(t *testing.T) {
	t.Parallel()
	run(t, choiceCases)
}

func TestChoiceNotOffered(t *testing.T) {
	t.Parallel()
	_, err := New("", "hermes", Options{Functions: []string{"a"}, Choice: "b"})
	if err == nil || !strings.Contains(err.Error(), "tool_choice") {
		t.Fatalf("New with a named function not offered: err %v, want one naming tool_choice", err)
	}
}

const toolsJSON = `[
 {"type": "function", "function": {"name": "get_weather", "description": "d",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "at": {"$ref": "#/$defs/Time"}},
   "required": ["city"], "$defs": {"Time": {"type": "string"}}}}},
 {"type": "function", "function": {"name": "get_time"}},
 {"type": "function", "function": {"name": "zone", "parameters": {"$defs": {"Time": {"type": "string"}}, "type": "object"}}}
]`

func TestRequiredSchema(t *testing.T) {
	t.Parallel()
	got, err := RequiredSchema(toolsJSON)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"array","minItems":1,"items":{"type":"object","anyOf":[` +
		`{"properties":{"name":{"type":"string","enum":["get_weather"]},"parameters":{"type":"object","properties":{"city":{"type":"string"},"at":{"$ref":"#/$defs/Time"}},"required":["city"]}},"required":["name","parameters"]},` +
		`{"properties":{"name":{"type":"string","enum":["get_time"]},"parameters":{"type":"object","properties":{}}},"required":["name","parameters"]},` +
		`{"properties":{"name":{"type":"string","enum":["zone"]},"parameters":{"type":"object"}},"required":["name","parameters"]}` +
		`]},"$defs":{"Time":{"type":"string"}}}`
	if got != want {
		t.Fatalf("RequiredSchema:\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("RequiredSchema is not JSON")
	}
}

func TestNamedSchema(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"get_weather": `{"type":"object","properties":{"city":{"type":"string"},"at":{"$ref":"#/$defs/Time"}},"required":["city"],"$defs":{"Time":{"type":"string"}}}`,
		"get_time":    `{"type":"object"}`,
	} {
		got, err := NamedSchema(toolsJSON, name)
		if err != nil || got != want {
			t.Errorf("NamedSchema(%s) = %s, %v; want %s", name, got, err, want)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ tools, fn, want string }{
		"not JSON":         {`{`, "", "tools:"},
		"no tools":         {`[]`, "", "tools: none"},
		"not a function":   {`[{"type": "web_search"}]`, "", "tools[0].type"},
		"no name":          {`[{"type": "function", "function": {}}]`, "", "tools[0].function.name"},
		"bad parameters":   {`[{"type": "function", "function": {"name": "a", "parameters": [1]}}]`, "", "tools[0].function.parameters"},
		"defs differ":      {`[{"type":"function","function":{"name":"a","parameters":{"$defs":{"T":{"type":"string"}}}}},{"type":"function","function":{"name":"b","parameters":{"$defs":{"T":{"type":"number"}}}}}]`, "", "tools[1].function.parameters.$defs.T"},
		"named not a tool": {toolsJSON, "nope", `tool_choice: function "nope"`},
	} {
		var err error
		if c.fn != "" {
			_, err = NamedSchema(c.tools, c.fn)
		} else {
			_, err = RequiredSchema(c.tools)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", name, err, c.want)
		}
	}
}
