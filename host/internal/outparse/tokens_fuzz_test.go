package outparse

import (
	"fmt"
	"testing"
)

// FuzzTokenParsers checks that the mistral, deepseek_v3 and harmony
// parsers give the same result however the output is cut, and never
// panic.
func FuzzTokenParsers(f *testing.F) {
	for _, s := range []string{
		`Hi [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS][{"name": "get_time", "arguments": {}}]`,
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"<|channel|>analysis<|message|>a<|end|><|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>",
		"<|channel|>final<|message|>x<|return|><|start|>assistant<|channel|>commentary<|message|>y",
	} {
		f.Add(s, uint8(3))
	}
	parsers := [][2]string{{"", "mistral"}, {"deepseek_r1", "deepseek_v3"}, {"openai_gptoss", "openai"}, {"openai_gptoss", ""}}
	f.Fuzz(func(t *testing.T, out string, step uint8) {
		var cuts []int
		for k := int(step%7) + 1; k < len(out); k += int(step%7) + 1 {
			cuts = append(cuts, k)
		}
		for _, ps := range parsers {
			c := tcase{reasoning: ps[0], tool: ps[1], opts: weather, out: out}
			whole, split := parse(t, c, nil), parse(t, c, cuts)
			if fmt.Sprintf("%#v", whole) != fmt.Sprintf("%#v", split) {
				t.Fatalf("%v on %q: whole %#v, cut every %d bytes %#v", ps, out, whole, step%7+1, split)
			}
		}
	})
}
