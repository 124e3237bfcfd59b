package outparse

import (
	"fmt"
	"testing"
)

// fuzzConfigs are the parsers FuzzSplit picks from.
var fuzzConfigs = []tcase{
	{tool: "hermes", opts: weather},
	{reasoning: "qwen3", tool: "hermes", opts: weather},
	{tool: "llama3_json", opts: weather},
	{tool: "hermes", opts: required},
	{tool: "hermes", opts: named},
	{reasoning: "deepseek_r1", tool: "llama3_json", opts: weather},
}

// FuzzSplit checks that any output cut anywhere parses as it does fed
// whole: a parser's state never depends on where the pieces end.
func FuzzSplit(f *testing.F) {
	for i, c := range append(append(append([]tcase{}, hermesCases...), llamaCases...), choiceCases...) {
		for k, fc := range fuzzConfigs {
			if fc.reasoning == c.reasoning && fc.tool == c.tool && fc.opts.Choice == c.opts.Choice {
				f.Add(c.out, []byte{byte(i), 3, 1, 7}, uint8(k))
			}
		}
	}
	f.Fuzz(func(t *testing.T, out string, cuts []byte, sel uint8) {
		c := fuzzConfigs[int(sel)%len(fuzzConfigs)]
		c.out = out
		var at []int
		last := 0
		for _, b := range cuts {
			if last += int(b); last > len(out) {
				break
			}
			at = append(at, last)
		}
		whole, split := parse(t, c, nil), parse(t, c, at)
		if fmt.Sprintf("%#v", whole) != fmt.Sprintf("%#v", split) {
			t.Fatalf("cut at %v:\n got %#v\nwhole %#v", at, split, whole)
		}
	})
}
