package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// fuzzSeeds are the inputs of the kinds issue 24 names.
var fuzzSeeds = append([]string{
	strings.Repeat(" ", 40) + "x" + strings.Repeat("\n", 9),
	"e" + strings.Repeat("\u0301", 40) + "ﬁ\x00",
	"\xff\xfe invalid \xc3 UTF-8 \xe2\x82",
	"<|im_start|>user\n[INST] <s>hi</s> [/INST]",
	strings.Repeat("9", 100),
	"\U0001FBF5 \u1AC1 \u0898",
}, referenceTexts...)

func fuzzStages[T any](t testing.TB, cases []struct{ name, stage string }, build func(json.RawMessage, string) (T, error)) []T {
	out := make([]T, 0, len(cases))
	for _, c := range cases {
		s, err := build(json.RawMessage(c.stage), c.name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var cases []struct{ name, stage string }
	for _, c := range referenceCases {
		if c.normalized != nil {
			cases = append(cases, struct{ name, stage string }{c.name, c.stage})
		}
	}
	cases = append(cases, struct{ name, stage string }{"nmt", `{"type":"Sequence","normalizers":[{"type":"Nmt"},{"type":"ByteLevel"},{"type":"Prepend","prepend":"▁"}]}`})
	norms := fuzzStages(f, cases, buildNormalizer)
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range norms {
			_ = n.normalize(s)
		}
	})
}

func FuzzPreTokenize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var cases []struct{ name, stage string }
	for _, c := range referenceCases {
		if c.pieces != nil {
			cases = append(cases, struct{ name, stage string }{c.name, c.stage})
		}
	}
	cases = append(cases, struct{ name, stage string }{"meta", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`})
	pres := fuzzStages(f, cases, buildPreTokenizer)
	byteLevel := mustPre(f, `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`)
	gpt4o := pres[indexOfCase("GPT4o")]
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range pres {
			_ = p.preTokenize([]piece{{text: s, first: true}, {text: s}})
		}
		// Byte-level pieces are the input's bytes, all of them, in order.
		for _, p := range []preTokenizer{byteLevel, gpt4o} {
			if got := unByteLevel(p.preTokenize([]piece{{text: s, first: true}})); got != s {
				t.Fatalf("pieces give %q back, not %q", got, s)
			}
		}
	})
}

func indexOfCase(name string) int {
	i := 0
	for _, c := range referenceCases {
		if c.name == name {
			return i
		}
		if c.pieces != nil {
			i++
		}
	}
	return -1
}

// unByteLevel maps pieces in GPT-2's alphabet back to bytes.
func unByteLevel(ps []piece) string {
	back := map[rune]byte{}
	for b, r := range byteChars {
		back[r] = byte(b)
	}
	var sb strings.Builder
	for _, p := range ps {
		for _, r := range p.text {
			sb.WriteByte(back[r])
		}
	}
	return sb.String()
}
