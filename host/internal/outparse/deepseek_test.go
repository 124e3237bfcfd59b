package outparse

import "testing"

// DeepSeek V3's calls as vLLM's parser documents them (its docstring's
// two calls) and as the model is sloppy.
func TestDeepSeekV3(t *testing.T) {
	t.Parallel()
	const (
		ds    = "deepseek_v3"
		begin = "<｜tool▁calls▁begin｜>"
		end   = "<｜tool▁calls▁end｜>"
		call  = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
		ce    = "<｜tool▁call▁end｜>"
	)
	paris := Call{Name: "get_weather", Arguments: `{"city": "Paris"}`}
	utc := Call{Name: "get_time", Arguments: `{"tz": "UTC"}`}
	parisCall := call + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + ce
	utcCall := call + "get_time\n```json\n{\"tz\": \"UTC\"}\n```" + ce
	run(t, []tcase{
		{name: "documented two calls", tool: ds, opts: weather, out: begin + parisCall + "\n" + utcCall + end,
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "text before", tool: ds, opts: weather, out: "Checking.\n\n" + begin + parisCall + end,
			want: Whole{Content: "Checking.\n\n", Calls: []Call{paris}}},
		{name: "text after", tool: ds, opts: weather, out: begin + parisCall + end + "Done",
			want: Whole{Content: "Done", Calls: []Call{paris}}},
		{name: "no fence", tool: ds, opts: weather, out: begin + call + "get_time\n{\"tz\": \"UTC\"}" + ce + end,
			want: Whole{Calls: []Call{utc}}},
		{name: "no newline before the arguments", tool: ds, opts: weather, out: begin + call + `get_time{"tz": "UTC"}` + ce + end,
			want: Whole{Calls: []Call{utc}}},
		{name: "no calls end", tool: ds, opts: weather, out: begin + parisCall + utcCall,
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "no call end at the output's end", tool: ds, opts: weather,
			out:  begin + call + "get_weather\n```json\n{\"city\": \"Paris\"}\n```",
			want: Whole{Calls: []Call{paris}}},
		{name: "no call end before the next", tool: ds, opts: weather,
			out:  begin + call + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + utcCall + end,
			want: Whole{Calls: []Call{paris, utc}}},
		{name: "no call", tool: ds, opts: weather, out: "plain ｜ text <｜tool", want: Whole{Content: "plain ｜ text <｜tool"}},
		{name: "tools not offered", tool: ds, out: begin + parisCall + end, want: Whole{Content: begin + parisCall + end}},
		{name: "after r1 reasoning", reasoning: "deepseek_r1", tool: ds, opts: weather,
			out:  "Need weather.</think>Sure.\n" + begin + parisCall + end,
			want: Whole{Reasoning: "Need weather.", Content: "Sure.\n", Calls: []Call{paris}}},
		{name: "a call ends unclosed reasoning", reasoning: "deepseek_r1", tool: ds, opts: weather,
			out:  "Need weather." + begin + parisCall + end,
			want: Whole{Reasoning: "Need weather.", Calls: []Call{paris}}},
	})
}

func TestDeepSeekV3Malformed(t *testing.T) {
	t.Parallel()
	const (
		ds    = "deepseek_v3"
		begin = "<｜tool▁calls▁begin｜>"
		end   = "<｜tool▁calls▁end｜>"
		call  = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
		ce    = "<｜tool▁call▁end｜>"
	)
	bad := call + "get_weather\n```json\n{\"city\": Paris}\n```" + ce
	unknown := call + "send_mail\n```json\n{}\n```" + ce
	good := call + "get_time\n```json\n{}\n```" + ce
	run(t, []tcase{
		{name: "bad JSON", tool: ds, opts: weather, out: begin + bad + end,
			want: Whole{Content: bad, Failures: 1}},
		{name: "unknown function, then a good one", tool: ds, opts: weather, out: begin + unknown + good + end,
			want: Whole{Content: unknown, Calls: []Call{{Name: "get_time", Arguments: "{}"}}, Failures: 1}},
		{name: "unclosed JSON at the end", tool: ds, opts: weather, out: begin + call + "get_weather\n```json\n{\"city\": \"Pa",
			want: Whole{Content: call + "get_weather\n```json\n{\"city\": \"Pa", Failures: 1}},
		{name: "no separator", tool: ds, opts: weather, out: begin + "<｜tool▁call▁begin｜>get_time{}" + ce + end,
			want: Whole{Content: "<｜tool▁call▁begin｜>get_time{}" + ce, Failures: 1}},
		{name: "no call begin", tool: ds, opts: weather, out: begin + "function<｜tool▁sep｜>get_time\n{}" + ce + end,
			want: Whole{Calls: []Call{{Name: "get_time", Arguments: "{}"}}}},
	})
}
