package outparse

import (
	"slices"
	"testing"
)

// gpt-oss's outputs as openai/harmony's docs/format.md gives them (the
// prompt ends with "<|start|>assistant").
func TestHarmony(t *testing.T) {
	t.Parallel()
	const (
		g, o     = "openai_gptoss", "openai"
		analysis = `<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>`
		think    = `User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.`
		final    = `<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>`
		need     = "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
		sf       = `<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"San Francisco"}<|call|>`
	)
	sfCall := Call{Name: "get_weather", Arguments: `{"location":"San Francisco"}`}
	utc := Call{Name: "get_time", Arguments: `{"tz":"UTC"}`}
	run(t, []tcase{
		{name: "reasoning then final", reasoning: g, tool: o, opts: weather, out: analysis + final,
			want: Whole{Reasoning: think, Content: "2 + 2 = 4."}},
		{name: "reasoning then a call", reasoning: g, tool: o, opts: weather, out: need + sf,
			want: Whole{Reasoning: "Need to use function get_weather.", Calls: []Call{sfCall}}},
		{name: "recipient in the role's part", reasoning: g, tool: o, opts: weather,
			out:  `<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{"tz":"UTC"}<|call|>`,
			want: Whole{Calls: []Call{utc}}},
		{name: "first message a call", reasoning: g, tool: o, opts: weather,
			out:  ` to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>{"tz":"UTC"}<|call|>`,
			want: Whole{Calls: []Call{utc}}},
		{name: "preamble then calls", reasoning: g, tool: o, opts: weather,
			out: need + "<|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|>" + sf +
				`<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"tz":"UTC"}<|call|>`,
			want: Whole{Reasoning: "Need to use function get_weather.", Content: "Checking both.", Calls: []Call{sfCall, utc}}},
		{name: "call without <|call|> at the end", reasoning: g, tool: o, opts: weather, out: need + sf[:len(sf)-len("<|call|>")],
			want: Whole{Reasoning: "Need to use function get_weather.", Calls: []Call{sfCall}}},
		{name: "final without its end", reasoning: g, tool: o, opts: weather, out: analysis + "<|start|>assistant<|channel|>final<|message|>Hi <b>",
			want: Whole{Reasoning: think, Content: "Hi <b>"}},
		{name: "analysis without its end", reasoning: g, tool: o, out: "<|channel|>analysis<|message|>Hmm, <|",
			want: Whole{Reasoning: "Hmm, <|"}},
		{name: "final without <|end|><|start|>", reasoning: g, out: "<|channel|>analysis<|message|>a<|channel|>final<|message|>b",
			want: Whole{Reasoning: "a", Content: "b"}},
		{name: "no harmony markup", reasoning: g, tool: o, opts: weather, out: "Hello there", want: Whole{Content: "Hello there"}},
		{name: "no header, then a message", reasoning: g, out: "Hi.\n<|channel|>final<|message|>4",
			want: Whole{Content: "Hi.\n4"}},
		{name: "text after a message's end", reasoning: g, out: "<|channel|>final<|message|>4<|end|> extra",
			want: Whole{Content: "4 extra"}},
		{name: "a header cut short is dropped", reasoning: g, out: analysis + "<|start|>assistant<|chan",
			want: Whole{Reasoning: think}},
		{name: "no reasoning parser: analysis dropped", tool: o, opts: weather, out: need + sf,
			want: Whole{Calls: []Call{sfCall}}},
		{name: "thinking off: analysis dropped", reasoning: g, tool: o, opts: Options{Functions: weather.Functions, ReasoningOff: true},
			out: analysis + final, want: Whole{Content: "2 + 2 = 4."}},
		{name: "no tool parser: a call is content", reasoning: g, opts: weather, out: need + sf,
			want: Whole{Reasoning: "Need to use function get_weather.", Content: sf}},
		{name: "tools not offered: a call is content", reasoning: g, tool: o, out: need + sf,
			want: Whole{Reasoning: "Need to use function get_weather.", Content: sf}},
	})
}

func TestHarmonyMalformed(t *testing.T) {
	t.Parallel()
	const (
		g, o = "openai_gptoss", "openai"
		head = "<|start|>assistant<|channel|>commentary to=functions."
	)
	bad := head + `get_weather <|constrain|>json<|message|>{"location":<|call|>`
	unknown := head + `send_mail <|constrain|>json<|message|>{}<|call|>`
	good := head + `get_time <|constrain|>json<|message|>{}<|call|>`
	run(t, []tcase{
		{name: "bad JSON", reasoning: g, tool: o, opts: weather, out: "<|channel|>analysis<|message|>x<|end|>" + bad,
			want: Whole{Reasoning: "x", Content: bad, Failures: 1}},
		{name: "unknown function, then a good one", reasoning: g, tool: o, opts: weather, out: unknown + good,
			want: Whole{Content: unknown, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
		{name: "unclosed JSON at the end", reasoning: g, tool: o, opts: weather, out: head + `get_weather<|message|>{"loc`,
			want: Whole{Content: head + `get_weather<|message|>{"loc`, Failures: 1}},
		{name: "built-in tool not offered", reasoning: g, tool: o, opts: weather,
			out:  `<|channel|>analysis to=browser.search code<|message|>{"query":"x"}<|call|>`,
			want: Whole{Content: `<|channel|>analysis to=browser.search code<|message|>{"query":"x"}<|call|>`, Failures: 1}},
	})
}

// Content and reasoning go out as they come, not held to the message's
// end; only a possible marker's start is held.
func TestHarmonyStreams(t *testing.T) {
	t.Parallel()
	p, err := New("openai_gptoss", "openai", weather)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ in, reasoning, content string }{
		{in: "<|channel|>analysis<|message|>Let me", reasoning: "Let me"},
		{in: " think<|e", reasoning: " think"},
		{in: "nd|><|start|>assistant<|channel|>final<|message|>The answer", content: "The answer"},
		{in: " is 4<", content: " is 4"},
		{in: "|return|>"},
	} {
		d := p.Feed(step.in)
		if d.Reasoning != step.reasoning || d.Content != step.content || d.Calls != nil {
			t.Fatalf("Feed(%q) = %+v, want reasoning %q content %q", step.in, d, step.reasoning, step.content)
		}
	}
}

func TestHarmonyParsers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ reasoning, tool string }{
		{"openai_gptoss", "mistral"}, {"qwen3", "openai"}, {"deepseek_r1", "openai"},
	} {
		if _, err := New(c.reasoning, c.tool, weather); err == nil {
			t.Errorf("New(%q, %q) = nil error, want one: they read different formats", c.reasoning, c.tool)
		}
	}
	for _, c := range []struct{ reasoning, tool string }{
		{"openai_gptoss", "openai"}, {"openai_gptoss", None}, {None, "openai"}, {"", "openai"},
	} {
		if _, err := New(c.reasoning, c.tool, weather); err != nil {
			t.Errorf("New(%q, %q): %v", c.reasoning, c.tool, err)
		}
		got := Markers(c.reasoning, c.tool)
		for _, m := range harmonyMarkers {
			if !slices.Contains(got, m) {
				t.Errorf("Markers(%q, %q) = %q, want %q in it", c.reasoning, c.tool, got, m)
			}
		}
	}
}
