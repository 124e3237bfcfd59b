package outparse

import (
	"strings"
	"testing"
)

// hermesCases are outputs of Hermes 2 Pro and Qwen2.5/Qwen3 (the form of
// Qwen's function-calling guide and vLLM's hermes tests), and sloppy or
// malformed ones.
var hermesCases = []tcase{
	{name: "qwen one call", tool: "hermes", opts: weather,
		out:  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
	{name: "text before a call", tool: "hermes", opts: weather,
		out:  "Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
		want: Whole{Content: "Let me check.\n", Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "two calls, newlines between dropped", tool: "hermes", opts: weather,
		out: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n" +
			"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>\n",
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Oslo"}`}, {Name: "get_time", Arguments: `{"tz": "CET"}`}}}},
	{name: "text between and after calls kept", tool: "hermes", opts: weather,
		out:  "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\nand\n<tool_call>{\"name\": \"get_time\"}</tool_call> done",
		want: Whole{Content: "\nand\n done", Calls: []Call{{Name: "get_time", Arguments: "{}"}, {Name: "get_time", Arguments: "{}"}}}},
	{name: "thinking then a call", reasoning: "qwen3", tool: "hermes", opts: weather,
		out:  "<think>\nNeeds the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		want: Whole{Reasoning: "\nNeeds the weather.\n", Content: "\n\n", Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Rome"}`}}}},
	{name: "a call ends unclosed reasoning", reasoning: "qwen3", tool: "hermes", opts: weather,
		out:  "<think>I will call it<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
		want: Whole{Reasoning: "I will call it", Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "unclosed at the end of output", tool: "hermes", opts: weather,
		out:  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n",
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Lima"}`}}}},
	{name: "a new opening ends an unclosed call", tool: "hermes", opts: weather,
		out:  "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
		want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}, {Name: "get_time", Arguments: "{}"}}}},
	{name: "arguments as a JSON string", tool: "hermes", opts: weather,
		out:  "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Kyiv\\\"}\"}</tool_call>",
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Kyiv"}`}}}},
	{name: "whitespace around the JSON", tool: "hermes", opts: weather,
		out:  "<tool_call>  \r\n\t{\"name\":\"get_time\",\"arguments\":{\"a\":[1,{\"b\":\"}\"}]}}  \n\n</tool_call>",
		want: Whole{Calls: []Call{{Name: "get_time", Arguments: `{"a":[1,{"b":"}"}]}`}}}},
	{name: "malformed JSON is content, counted", tool: "hermes", opts: weather,
		out:  "Hi <tool_call>{\"name\": \"get_time\", \"arguments\": {oops}}</tool_call>",
		want: Whole{Content: "Hi <tool_call>{\"name\": \"get_time\", \"arguments\": {oops}}</tool_call>", Failures: 1}},
	{name: "unknown function is content, counted", tool: "hermes", opts: weather,
		out: "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"get_time\"}</tool_call>",
		want: Whole{Content: "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
			Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
	{name: "arguments not an object, counted", tool: "hermes", opts: weather,
		out:  "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>",
		want: Whole{Content: "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>", Failures: 1}},
	{name: "unclosed malformed is content, counted", tool: "hermes", opts: weather,
		out: "<tool_call>{\"name\": \"get_ti", want: Whole{Content: "<tool_call>{\"name\": \"get_ti", Failures: 1}},
	{name: "tag-like text is content", tool: "hermes", opts: weather,
		out: "use <tool_cal> or </tool_call> <tool_c", want: Whole{Content: "use <tool_cal> or </tool_call> <tool_c"}},
	{name: "no tools offered: all content", tool: "hermes",
		out:  "<tool_call>{\"name\": \"get_time\"}</tool_call>",
		want: Whole{Content: "<tool_call>{\"name\": \"get_time\"}</tool_call>"}},
	{name: "hermes 2 pro: arguments before name", tool: "hermes", opts: weather,
		out:  "<tool_call>\n{\"arguments\": {\"city\": \"Bern\"}, \"name\": \"get_weather\"}\n</tool_call>",
		want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "Bern"}`}}}},
	{name: "vLLM's QwQ output: thinking, multibyte arguments, trailing text", reasoning: "qwen3", tool: "hermes",
		opts: Options{InReasoning: true, Functions: weather.Functions},
		out:  "好的，需要查询。\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"燃气 轮机\"}}\n</tool_call>\n\n ",
		want: Whole{Reasoning: "好的，需要查询。\n", Content: "\n\n", Calls: []Call{{Name: "get_weather", Arguments: `{"city": "燃气 轮机"}`}}}},
	{name: "arguments null", tool: "hermes", opts: weather,
		out: "<tool_call>{\"name\": \"get_time\", \"arguments\": null}</tool_call>", want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	{name: "plain answer", tool: "hermes", opts: weather, out: "The sky is blue.", want: Whole{Content: "The sky is blue."}},
}

func TestHermes(t *testing.T) {
	t.Parallel()
	run(t, hermesCases)
}

// BenchmarkHermes feeds a 2 KB answer with a call in 4-byte pieces, as
// an engine streams tokens.
func BenchmarkHermes(b *testing.B) {
	out := strings.Repeat("Some words of the answer. ", 60) + "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" +
		strings.Repeat("x", 400) + "\"}}\n</tool_call>"
	var pieces []string
	for i := 0; i < len(out); i += 4 {
		pieces = append(pieces, out[i:min(i+4, len(out))])
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := New("qwen3", "hermes", weather)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range pieces {
			p.Feed(s)
		}
		if p.Finish(); p.Calls() != 1 {
			b.Fatalf("%d calls, want 1", p.Calls())
		}
	}
}
