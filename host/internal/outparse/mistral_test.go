package outparse

import "testing"

// Mistral's outputs: the old form as vLLM's tests give it
// (tests/tool_use/test_mistral_tool_parser.py), the v11 form as
// mistral-common encodes a call.
func TestMistral(t *testing.T) {
	t.Parallel()
	const m = "mistral"
	paris := Call{Name: "get_weather", Arguments: `{"city": "Paris"}`}
	utc := Call{Name: "get_time", Arguments: `{"tz": "UTC"}`}
	run(t, []tcase{
		{name: "old form", tool: m, opts: weather,
			out:  `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]`,
			want: Whole{Calls: []Call{paris}}},
		{name: "old form two calls", tool: m, opts: weather,
			out:  `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]`,
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "old form one object", tool: m, opts: weather,
			out:  `[TOOL_CALLS]{"name": "get_time", "arguments": {"tz": "UTC"}}`,
			want: Whole{Calls: []Call{utc}}},
		{name: "v11", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`,
			want: Whole{Calls: []Call{paris}}},
		{name: "v11 two calls", tool: m, opts: weather,
			out:  "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}\n[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}\n",
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "v11 calls without a new [TOOL_CALLS]", tool: m, opts: weather,
			out:  `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"},get_time[ARGS]{"tz": "UTC"}`,
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "v13 call id", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}`,
			want: Whole{Calls: []Call{paris}}},
		{name: "name then JSON without [ARGS]", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather{"city": "Paris"}`,
			want: Whole{Calls: []Call{paris}}},
		{name: "no arguments", tool: m, opts: weather, out: `[TOOL_CALLS]get_time[ARGS]{}`,
			want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
		{name: "text before", tool: m, opts: weather, out: `Let me look. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`,
			want: Whole{Content: "Let me look. ", Calls: []Call{paris}}},
		{name: "text after", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} Done.`,
			want: Whole{Content: " Done.", Calls: []Call{paris}}},
		{name: "text between calls", tool: m, opts: weather, out: `[TOOL_CALLS]get_time[ARGS]{"tz": "UTC"} and [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`,
			want: Whole{Content: " and ", Calls: []Call{utc, paris}}},
		{name: "braces in strings", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"city": "}]\"{"}`,
			want: Whole{Calls: []Call{{Name: "get_weather", Arguments: `{"city": "}]\"{"}`}}}},
		{name: "no call", tool: m, opts: weather, out: "Plain [TOOL", want: Whole{Content: "Plain [TOOL"}},
		{name: "tools not offered", tool: m, out: `[TOOL_CALLS]get_time[ARGS]{}`,
			want: Whole{Content: `[TOOL_CALLS]get_time[ARGS]{}`}},
	})
}

func TestMistralMalformed(t *testing.T) {
	t.Parallel()
	const m = "mistral"
	run(t, []tcase{
		{name: "bad JSON", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"city": }`,
			want: Whole{Content: `[TOOL_CALLS]get_weather[ARGS]{"city": }`, Failures: 1}},
		{name: "unknown function", tool: m, opts: weather, out: `[TOOL_CALLS]send_mail[ARGS]{"to": "a"}`,
			want: Whole{Content: `[TOOL_CALLS]send_mail[ARGS]{"to": "a"}`, Failures: 1}},
		{name: "unclosed at the end", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"city": "Par`,
			want: Whole{Content: `[TOOL_CALLS]get_weather[ARGS]{"city": "Par`, Failures: 1}},
		{name: "marker alone at the end", tool: m, opts: weather, out: "Hi[TOOL_CALLS]",
			want: Whole{Content: "Hi[TOOL_CALLS]", Failures: 1}},
		{name: "not a call, then a call", tool: m, opts: weather, out: `[TOOL_CALLS]not a call[TOOL_CALLS]get_time[ARGS]{}`,
			want: Whole{Content: "[TOOL_CALLS]not a call", Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
		{name: "unclosed, then a call", tool: m, opts: weather, out: `[TOOL_CALLS]get_weather[ARGS]{"a[TOOL_CALLS]get_time[ARGS]{}`,
			want: Whole{Content: `[TOOL_CALLS]get_weather[ARGS]{"a`, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
		{name: "old form one unknown", tool: m, opts: weather,
			out: `[TOOL_CALLS][{"name": "nope", "arguments": {}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]`,
			want: Whole{Content: `{"name": "nope", "arguments": {}}`,
				Calls: []Call{{Name: "get_time", Arguments: `{"tz": "UTC"}`}}, Failures: 1}},
		{name: "old form bad array", tool: m, opts: weather, out: `[TOOL_CALLS] [{"name": get_time}]`,
			want: Whole{Content: `[TOOL_CALLS] [{"name": get_time}]`, Failures: 1}},
		{name: "old form arguments a string", tool: m, opts: weather,
			out:  `[TOOL_CALLS][{"name": "get_time", "arguments": "{}"}]`,
			want: Whole{Content: `{"name": "get_time", "arguments": "{}"}`, Failures: 1}},
	})
}
