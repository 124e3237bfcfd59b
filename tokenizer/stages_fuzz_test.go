package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// fuzzSeeds are the inputs of the kinds issue 24 names.
var fuzzSeeds = append([]string{
	strings.Repeat(" ", 40) + "x" + strings.Repeat("\n", 9),
	"e" + strings.Repeat("\u0301", 40) + "ﬁ\x00",
	"\xff\xfe invalid \xc3 UTF-8 \xe2\x82",
	"<|im_start|>user\n[INST] <s>hi</s> [/INST]",
	strings.Repeat("9", 100),
	"\U0001FBF5 \u1AC1 \u0898",
	"Cụ thể, bạn sẽ tham gia ậ… ำน\u0e49ำ3ลำ",
	"\u1100\u1161\u11a8 각 \u0b47\u0b3e \u09c7\u09be a\u0316\u0301\u0300\u0327 \u1e0b\u0323 q\u0307\u0323",
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
	forms := []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD}
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range norms {
			_ = n.normalize(s)
		}
		// Where Go's norm is exact (no long run of marks, nothing new
		// since Unicode 9.0), the slow path agrees with it.
		if !utf8.ValidString(s) || longMarkRun(s) || strings.ContainsFunc(s, func(r rune) bool { return inRanges(since9Normalizing, r) }) {
			return
		}
		for _, fm := range forms {
			if got, want := (unicodeForm{fm}).slow(s), fm.String(s); got != want {
				t.Fatalf("form %v of %+q: slow path %+q, norm %+q", fm, s, got, want)
			}
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
