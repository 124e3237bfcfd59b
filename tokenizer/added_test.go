package tokenizer

import (
	"slices"
	"testing"
)

// addedDoc: one-character vocabulary, no merges, added tokens after it.
func addedDoc() doc {
	d := newDoc(vocabOf("a", "b", "x", "y", " ", "w", "o", "r", "d", "\n"), []string{})
	d["added_tokens"] = []any{
		added(10, "<a>", "special"),
		added(11, "<a><b>", "special"),
		added(12, "[L]", "lstrip"),
		added(13, "[R]", "rstrip"),
		added(14, "word", "single_word"),
	}
	return d
}

func TestAddedTokensMatchReference(t *testing.T) {
	d := addedDoc()
	// transformers.js ignores single_word ("aword b" gives it [0 14 4 1],
	// "wordy" [14 3]) and gives null for a character the vocabulary lacks
	// ("<" in "x<a>y<a"), which the Rust library drops: the want is Rust's.
	runRef(t, []refCase{{"added", d, []encodeCase{
		{"x<a><b>y", []uint32{2, 11, 3}},
		{"x<a>y<a", []uint32{2, 10, 3, 0}},
		{"<a><a><b><a>", []uint32{10, 11, 10}},
		{"  [L]  x", []uint32{12, 4, 4, 2}},
		{"x [R]   y", []uint32{2, 4, 13, 3}},
		{"x [L][R] \n y", []uint32{2, 12, 13, 3}},
		{"aword b", []uint32{0, 5, 6, 7, 8, 4, 1}},
		{"a word b", []uint32{0, 4, 14, 4, 1}},
		{"word", []uint32{14}},
		{"wordy", []uint32{5, 6, 7, 8, 3}},
		{"word\n", []uint32{14, 9}},
	}}})
}

// An added token's id is the Rust library's: the vocabulary's for a
// token in it, the next one after the vocabulary for a new one.
func TestAddedTokenIDs(t *testing.T) {
	d := addedDoc()
	d["added_tokens"] = []any{added(0, "a", "special"), added(10, "<n>"), added(11, "<m>", "special")}
	tok := mustLoad(t, d, "")
	checkEncodes(t, tok, false, []encodeCase{{"ba<n><m>", []uint32{1, 0, 10, 11}}})
	if !tok.IsSpecial(0) || tok.IsSpecial(10) || !tok.IsSpecial(11) {
		t.Fatal("IsSpecial does not follow the added tokens' special")
	}
	if s, ok := tok.Token(11); !ok || s != "<m>" {
		t.Fatalf("Token(11) = %q, %v", s, ok)
	}
}

// Normalized added tokens match the normalized text by their normalized
// content; the others match the raw text, before normalization (the Rust
// library's extract_and_normalize).
func TestNormalizedAddedTokens(t *testing.T) {
	d := newDoc(vocabOf("a", "b", "x", "<", ">", "t", "k"), []string{})
	d["normalizer"] = map[string]any{"type": "TestLower"}
	d["added_tokens"] = []any{
		added(7, "<TK>", "normalized"), // matches "<tk>" after lowercasing
		added(8, "<RAW>"),              // matches only as written
		added(9, "X", "normalized"),    // normalized form "x"
	}
	tok := mustLoad(t, d, "")
	checkEncodes(t, tok, false, []encodeCase{
		{"A<TK>b", []uint32{0, 7, 1}},
		{"a<tk>", []uint32{0, 7}},
		{"<RAW>", []uint32{8}},
		{"<raw>", []uint32{3, 0, 4}}, // r and w are not in the vocabulary: dropped
		{"xX", []uint32{9, 9}},
	})
	// Decoding sees a normalized token in its normalized form, as the
	// Rust library (0.23) does.
	if s, _ := tok.Token(7); s != "<tk>" {
		t.Fatalf("Token(7) = %q, want the normalized form", s)
	}
	// Two tokens that normalize alike are refused, as the Rust library's
	// matcher refuses them.
	d["added_tokens"] = append(d["added_tokens"].([]any), added(10, "<tk>", "normalized"))
	if _, err := FromJSON(d.bytes(t), nil); err == nil {
		t.Fatal("two added tokens normalizing alike loaded")
	}
}

// A segment is first only when it starts at the input's first byte: the
// text after an added token is not (Metaspace's prepend_scheme "first").
func TestSegmentsFirst(t *testing.T) {
	d := addedDoc()
	tok := mustLoad(t, d, "")
	segs := tok.enc.added.split("xy<a>b<a>", nil)
	var firsts []bool
	for _, s := range segs {
		if s.tok == nil {
			firsts = append(firsts, s.first)
		}
	}
	if !slices.Equal(firsts, []bool{true, false}) {
		t.Fatalf("firsts = %v, want [true false]", firsts)
	}
	segs = tok.enc.added.split("<a>b", nil)
	if len(segs) != 2 || segs[1].first {
		t.Fatalf("the text after a leading added token is first: %+v", segs)
	}
}
