package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Test-only stages, under names no real stage has, so that the tests of
// the core do not depend on normalize.go and pretokenize.go.
type testLower struct{}

func (testLower) normalize(s string) string { return strings.ToLower(s) }

// testSpaceSplit splits after each space (" " goes with the next piece).
type testSpaceSplit struct{}

func (testSpaceSplit) preTokenize(in []piece) []piece {
	var out []piece
	for _, p := range in {
		start := 0
		for i := 1; i < len(p.text); i++ {
			if p.text[i] == ' ' {
				out = append(out, piece{text: p.text[start:i], first: p.first && start == 0})
				start = i
			}
		}
		if start < len(p.text) {
			out = append(out, piece{text: p.text[start:], first: p.first && start == 0})
		}
	}
	return out
}

func init() {
	normalizerTypes["TestLower"] = func(json.RawMessage, string) (normalizer, error) { return testLower{}, nil }
	preTokenizerTypes["TestSpaceSplit"] = func(json.RawMessage, string) (preTokenizer, error) { return testSpaceSplit{}, nil }
}

// doc is a tokenizer.json as a map, for tests to change.
type doc map[string]any

func (d doc) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (d doc) model() map[string]any { return d["model"].(map[string]any) }

// vocabOf gives tokens the ids 0, 1, 2...
func vocabOf(tokens ...string) map[string]any {
	v := map[string]any{}
	for i, s := range tokens {
		v[s] = i
	}
	return v
}

func added(id int, content string, opts ...string) map[string]any {
	a := map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}
	for _, o := range opts {
		a[o] = true
	}
	return a
}

// newDoc is a BPE file without stages.
func newDoc(vocab map[string]any, merges any) doc {
	return doc{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{},
		"normalizer": nil, "pre_tokenizer": nil, "post_processor": nil, "decoder": nil,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
}

func mustLoad(t testing.TB, d doc, config string) *Tokenizer {
	t.Helper()
	var cfg []byte
	if config != "" {
		cfg = []byte(config)
	}
	tok, err := FromJSON(d.bytes(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func encode(t testing.TB, tok *Tokenizer, text string, special bool) []uint32 {
	t.Helper()
	ids, err := tok.Encode(text, special)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

type encodeCase struct {
	text string
	want []uint32
}

func checkEncodes(t *testing.T, tok *Tokenizer, special bool, cases []encodeCase) {
	t.Helper()
	for _, c := range cases {
		if got := encode(t, tok, c.text, special); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

func TestLoadFromDirectory(t *testing.T) {
	dir := t.TempDir()
	d := newDoc(vocabOf("<s>", "</s>", "a", "b", "ab"), []string{"a b"})
	d["added_tokens"] = []any{added(0, "<s>", "special"), added(1, "</s>", "special")}
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), d.bytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, tok, "ab</s>", true); !slices.Equal(got, []uint32{4, 1}) {
		t.Fatalf("Encode = %v", got)
	}
	if got := tok.EOSTokenIDs(); len(got) != 0 {
		t.Fatalf("EOSTokenIDs without a config = %v", got)
	}
	cfg := `{"eos_token": {"content": "</s>", "__type": "AddedToken"}, "tokenizer_class": "PreTrainedTokenizerFast"}`
	if err := os.WriteFile(filepath.Join(dir, TokenizerConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if got := tok.EOSTokenIDs(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("EOSTokenIDs = %v, want [1]", got)
	}
	if !tok.IsSpecial(1) || tok.IsSpecial(4) {
		t.Fatal("IsSpecial: </s> should be special, ab not")
	}
	if s, ok := tok.Token(4); !ok || s != "ab" {
		t.Fatalf("Token(4) = %q, %v", s, ok)
	}
	if _, ok := tok.Token(99); ok {
		t.Fatal("Token(99) found")
	}
	if id, ok := tok.TokenID("</s>"); !ok || id != 1 {
		t.Fatalf("TokenID(</s>) = %d, %v", id, ok)
	}
	if tok.VocabSize() != 5 {
		t.Fatalf("VocabSize = %d", tok.VocabSize())
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), TokenizerFile) {
		t.Fatalf("Load(empty dir) err = %v, want one naming %s", err, TokenizerFile)
	}
}

// Refused files name the JSON path.
func TestRefusedFields(t *testing.T) {
	base := func() doc { return newDoc(vocabOf("a", "b", "ab"), []string{"a b"}) }
	cases := []struct {
		name  string
		edit  func(d doc)
		field string
	}{
		{"Unigram", func(d doc) { d.model()["type"] = "Unigram" }, "model.type"},
		{"WordPiece", func(d doc) { d.model()["type"] = "WordPiece" }, "model.type"},
		{"WordLevel", func(d doc) { d.model()["type"] = "WordLevel" }, "model.type"},
		{"dropout", func(d doc) { d.model()["dropout"] = 0.1 }, "model.dropout"},
		{"truncation", func(d doc) { d["truncation"] = map[string]any{"max_length": 8} }, "truncation"},
		{"padding", func(d doc) { d["padding"] = map[string]any{} }, "padding"},
		{"version", func(d doc) { d["version"] = "2.0" }, "version"},
		{"no model", func(d doc) { delete(d, "model") }, "model"},
		{"merge out of vocab", func(d doc) { d.model()["merges"] = []string{"a c"} }, "model.merges[0]"},
		{"merged out of vocab", func(d doc) { d.model()["merges"] = []string{"b a"} }, "model.merges[0]"},
		{"merge not a pair", func(d doc) { d.model()["merges"] = []string{"a b c"} }, "model.merges[0]"},
		{"merges malformed", func(d doc) { d.model()["merges"] = 3 }, "model.merges"},
		{"unk not in vocab", func(d doc) { d.model()["unk_token"] = "<unk>" }, "model.unk_token"},
		{"normalizer", func(d doc) { d["normalizer"] = map[string]any{"type": "Mystery"} }, "normalizer.type"},
		{"pre_tokenizer", func(d doc) { d["pre_tokenizer"] = map[string]any{"type": "Mystery"} }, "pre_tokenizer.type"},
		{"decoder", func(d doc) { d["decoder"] = map[string]any{"type": "Mystery"} }, "decoder.type"},
		{"post_processor", func(d doc) { d["post_processor"] = map[string]any{"type": "Mystery"} }, "post_processor.type"},
		{"post_processor in a Sequence", func(d doc) {
			d["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{map[string]any{"type": "ByteLevel"}, map[string]any{"type": "Mystery"}}}
		}, "post_processor.processors[1].type"},
		{"template $B", func(d doc) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 0}}}, "special_tokens": map[string]any{}}
		}, "post_processor.single[0].Sequence.id"},
		{"template unknown special", func(d doc) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}}, "special_tokens": map[string]any{}}
		}, "post_processor.single[0].SpecialToken.id"},
		{"added token field missing", func(d doc) {
			a := added(3, "<x>")
			delete(a, "lstrip")
			d["added_tokens"] = []any{a}
		}, "added_tokens[0].lstrip"},
		{"added token id", func(d doc) { d["added_tokens"] = []any{added(7, "<x>")} }, "added_tokens[0].id"},
		{"added token id of a vocabulary token", func(d doc) { d["added_tokens"] = []any{added(5, "ab")} }, "added_tokens[0].id"},
		{"two ids for a token", func(d doc) { d.model()["vocab"] = map[string]any{"a": 0, "b": 1, "ab": 1} }, "model.vocab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := base()
			c.edit(d)
			_, err := FromJSON(d.bytes(t), nil)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Field != c.field {
				t.Fatalf("err names %q (%v), want %q", fe.Field, err, c.field)
			}
		})
	}
	if _, err := FromJSON([]byte("{"), nil); err == nil {
		t.Fatal("a file that is not JSON loaded")
	}
	if _, err := FromJSON(base().bytes(t), []byte(`{"eos_token": 7}`)); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Fatalf("a malformed eos_token: err = %v", err)
	}
}

func TestEncodeRefusesInvalidUTF8(t *testing.T) {
	tok := mustLoad(t, newDoc(vocabOf("a"), []string{}), "")
	if _, err := tok.Encode("a\xff", false); err == nil {
		t.Fatal("invalid UTF-8 encoded")
	}
}
