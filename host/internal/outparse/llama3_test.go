package outparse

import "testing"

// llamaCases are outputs of Llama 3.1/3.2's JSON-based tool calling (the
// form of Meta's prompt-format page and vLLM's llama3_json tests), and
// sloppy or malformed ones.
var llamaCases = []tcase{
	{name: "meta's documented call", tool: "llama3_json", opts: weather,
		out:  `{"name": "get_weather", "parameters": {"city": "San Francisco, CA"}}`,
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "San Francisco, CA"}`}}}},
	{name: "with the python tag", tool: "llama3_json", opts: weather,
		out:  `<|python_tag|>{"name": "get_time", "parameters": {}}`,
		want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "leading whitespace", tool: "llama3_json", opts: weather,
		out:  "\n\n {\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
		want: Whole{Calls: []Call{{Name: "get_time", Arguments: `{"tz": "UTC"}`}}}},
	{name: "several separated by semicolons", tool: "llama3_json", opts: weather,
		out: `{"name": "get_weather", "parameters": {"city": "a"}}; {"name": "get_time", "parameters": {}} ; ` +
			`{"name": "get_weather", "parameters": {"city": "b"}};`,
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "a"}`}, {Name: "get_time", Arguments: "{}"},
			{Name: "get_weather", Arguments: `{"city": "b"}`}}}},
	{name: "arguments key and string arguments", tool: "llama3_json", opts: weather,
		out:  `{"name": "get_weather", "arguments": "{\"city\": \"x\"}"}`,
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "x"}`}}}},
	{name: "braces and quotes inside strings", tool: "llama3_json", opts: weather,
		out:  `{"name": "get_weather", "parameters": {"city": "He said \"{x}\" [y]}", "n": {"i": "}"}}}`,
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "He said \"{x}\" [y]}", "n": {"i": "}"}}`}}}},
	{name: "text after the call is content", tool: "llama3_json", opts: weather,
		out:  "{\"name\": \"get_time\", \"parameters\": {}}\n\nDone.",
		want: Whole{Content: "\n\nDone.", Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "text first is all content", tool: "llama3_json", opts: weather,
		out:  `Here is the result: {"name": "get_time", "parameters": {}}`,
		want: Whole{Content: `Here is the result: {"name": "get_time", "parameters": {}}`}},
	{name: "a JSON answer without name is content, not counted", tool: "llama3_json", opts: weather,
		out: `{"answer": 42}`, want: Whole{Content: `{"answer": 42}`}},
	{name: "malformed JSON is content, counted", tool: "llama3_json", opts: weather,
		out: `{"name": "get_time", "parameters": {invalid json}}`, want: Whole{Content: `{"name": "get_time", "parameters": {invalid json}}`, Failures: 1}},
	{name: "unclosed is content, counted", tool: "llama3_json", opts: weather,
		out: `{"name": "get_time", "parameters": {invalid json}`, want: Whole{Content: `{"name": "get_time", "parameters": {invalid json}`, Failures: 1}},
	{name: "unknown function is content, counted, next call kept", tool: "llama3_json", opts: weather,
		out:  `<|python_tag|>{"name": "brave_search", "parameters": {"q": "x"}}; {"name": "get_time", "parameters": {}}`,
		want: Whole{Content: `{"name": "brave_search", "parameters": {"q": "x"}}`, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
	{name: "both parameters and arguments, counted", tool: "llama3_json", opts: weather,
		out: `{"name": "get_time", "parameters": {}, "arguments": {}}`, want: Whole{Content: `{"name": "get_time", "parameters": {}, "arguments": {}}`, Failures: 1}},
	{name: "built-in tool code after the tag is content without it", tool: "llama3_json", opts: weather,
		out: "<|python_tag|>brave_search.call(query=\"weather\")", want: Whole{Content: "brave_search.call(query=\"weather\")"}},
	{name: "a tag later in the content begins a call", tool: "llama3_json", opts: weather,
		out:  `Checking. <|python_tag|>{"name": "get_time", "parameters": {}}`,
		want: Whole{Content: "Checking. ", Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "tag-like text is content", tool: "llama3_json", opts: weather,
		out: "<|python|> and <|python_ta", want: Whole{Content: "<|python|> and <|python_ta"}},
	{name: "whitespace only", tool: "llama3_json", opts: weather, out: " \n", want: Whole{Content: " \n"}},
	{name: "no tools offered: all content", tool: "llama3_json",
		out: `{"name": "get_time", "parameters": {}}`, want: Whole{Content: `{"name": "get_time", "parameters": {}}`}},
}

func TestLlama3JSON(t *testing.T) {
	t.Parallel()
	run(t, llamaCases)
}

func TestMarkers(t *testing.T) {
	t.Parallel()
	if got := Markers("qwen3", "llama3_json"); len(got) != 1 || got[0] != pythonTag {
		t.Errorf("Markers(qwen3, llama3_json) = %q, want [%q]", got, pythonTag)
	}
	if got := Markers("qwen3", "hermes"); len(got) != 0 {
		t.Errorf("Markers(qwen3, hermes) = %q, want none (<tool_call> is an ordinary token)", got)
	}
}
