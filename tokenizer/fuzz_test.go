package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// fuzzTokenizer has every path of the core: byte fallback with some byte
// tokens missing, unk fusing, affixes, merges, added tokens of every
// option, a normalizer and a pre-tokenizer (test stages), a template.
func fuzzTokenizer(t testing.TB) *Tokenizer {
	d := newDoc(vocabOf("<unk>", "a", "b", "ab", " ", "\t", "<0xE2>", "<0x82>", "<0xAC>", "<0x0A>", "<0xC3>"), []string{"a b"})
	m := d.model()
	m["unk_token"], m["byte_fallback"], m["fuse_unk"] = "<unk>", true, true
	d["normalizer"] = map[string]any{"type": "TestLower"}
	d["pre_tokenizer"] = map[string]any{"type": "TestSpaceSplit"}
	d["added_tokens"] = []any{
		added(11, "<s>", "special"), added(12, "[L]", "lstrip"), added(13, "[R]", "rstrip"),
		added(3, "ab", "single_word", "normalized"), added(14, "<S>", "normalized", "lstrip", "rstrip"),
	}
	d["post_processor"] = map[string]any{"type": "TemplateProcessing",
		"single":         []any{specialPiece("<s>"), seqPiece("A")},
		"special_tokens": map[string]any{"<s>": special("<s>", 11)}}
	return mustLoad(t, d, "")
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "ab", "aab b", "\t\n€é", "<s>x<s>", " [L] [R] ", "  <S>  ", "ABab ab", "\xff\xfe",
		strings.Repeat("a", 300), strings.Repeat("é", 50) + "<s>", "ﬁnance\x00", "日本語 🦙 👩‍👩‍👧"} {
		f.Add(s, true)
	}
	tok := fuzzTokenizer(f)
	f.Fuzz(func(t *testing.T, text string, special bool) {
		ids, err := tok.Encode(text, special)
		if err != nil {
			return
		}
		for _, id := range ids {
			if int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d, outside the vocabulary", text, id)
			}
		}
	})
}

// Encode is safe for concurrent use (the merge cache is shared).
func TestEncodeConcurrent(t *testing.T) {
	tok := fuzzTokenizer(t)
	want := encode(t, tok, "ab aab\tb €<s>[L] x", true)
	done := make(chan []uint32)
	for range 8 {
		go func() {
			var got []uint32
			for range 200 {
				got, _ = tok.Encode("ab aab\tb €<s>[L] x", true)
			}
			done <- got
		}()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatalf("concurrent Encode = %v, want %v", got, want)
		}
	}
}
