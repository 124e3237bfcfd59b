package tokenizer

import (
	"strings"
	"testing"
)

func special(name string, id int) map[string]any {
	return map[string]any{"id": name, "ids": []int{id}, "tokens": []string{name}}
}

func seqPiece(id string) map[string]any {
	return map[string]any{"Sequence": map[string]any{"id": id, "type_id": 0}}
}

func specialPiece(id string) map[string]any {
	return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": 0}}
}

// postDoc: "a", "b" and the special tokens <s>, </s>, <cls>, <sep>.
func postDoc(post map[string]any) doc {
	d := newDoc(vocabOf("a", "b", "ab"), []string{"a b"})
	d["added_tokens"] = []any{added(3, "<s>", "special"), added(4, "</s>", "special"), added(5, "<cls>", "special"), added(6, "<sep>", "special")}
	d["post_processor"] = post
	return d
}

func template() map[string]any {
	return map[string]any{"type": "TemplateProcessing",
		"single":         []any{specialPiece("<s>"), seqPiece("A"), specialPiece("</s>")},
		"pair":           []any{specialPiece("<s>"), seqPiece("A"), seqPiece("B")},
		"special_tokens": map[string]any{"<s>": special("<s>", 3), "</s>": special("</s>", 4)}}
}

func TestPostProcessorsMatchReference(t *testing.T) {
	bert := map[string]any{"type": "BertProcessing", "sep": []any{"<sep>", 6}, "cls": []any{"<cls>", 5}}
	roberta := map[string]any{"type": "RobertaProcessing", "sep": []any{"<sep>", 6}, "cls": []any{"<cls>", 5}, "trim_offsets": true, "add_prefix_space": false}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	seq := map[string]any{"type": "Sequence", "processors": []any{byteLevel, template()}}
	for _, c := range []struct {
		name string
		post map[string]any
		want []uint32
	}{
		{"template", template(), []uint32{3, 2, 0, 4}},
		{"bert", bert, []uint32{5, 2, 0, 6}},
		{"roberta", roberta, []uint32{5, 2, 0, 6}},
		{"bytelevel", byteLevel, []uint32{2, 0}},
		{"sequence", seq, []uint32{3, 2, 0, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := postDoc(c.post)
			dumpRef(t, refCase{name: "post_" + c.name, doc: d, cases: []encodeCase{{"aba", nil}}})
			tok := mustLoad(t, d, "")
			checkEncodes(t, tok, true, []encodeCase{{"aba", c.want}})
			checkEncodes(t, tok, false, []encodeCase{{"aba", []uint32{2, 0}}})
		})
	}
}

// Issue 24 item 6: for the classes whose post-processor transformers
// rebuilds, tokenizer_config.json's add_bos_token and add_eos_token decide
// what a plain prompt gets; for the others, tokenizer.json's
// post-processor does.
func TestConfigDecidesSpecialTokens(t *testing.T) {
	d := postDoc(template()) // the file's template: <s> $A </s>
	for _, c := range []struct {
		config string
		want   []uint32
	}{
		{``, []uint32{3, 2, 4}},
		{`{"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": false}`, []uint32{3, 2, 4}},
		{`{"tokenizer_class": "Qwen2Tokenizer", "add_eos_token": false}`, []uint32{3, 2, 4}},
		{`{"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>"}`, []uint32{3, 2}},
		{`{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_eos_token": false}`, []uint32{2}},
		{`{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": true, "add_eos_token": true}`, []uint32{3, 2, 4}},
		{`{"tokenizer_class": "LlamaTokenizerFast", "add_eos_token": true, "eos_token": {"content": "<sep>"}}`, []uint32{3, 2, 6}},
		{`{"tokenizer_class": "CodeLlamaTokenizer", "add_bos_token": null}`, []uint32{3, 2}},
		{`{"tokenizer_class": "GPTNeoXTokenizerFast"}`, []uint32{2}},
		{`{"tokenizer_class": "CohereTokenizerFast", "bos_token": null, "add_bos_token": false, "add_eos_token": true, "eos_token": "</s>"}`, []uint32{2, 4}},
	} {
		tok := mustLoad(t, d, c.config)
		checkEncodes(t, tok, true, []encodeCase{{"ab", c.want}})
		checkEncodes(t, tok, false, []encodeCase{{"ab", []uint32{2}}})
	}
	// A null token with its flag on: transformers raises at load.
	for _, cfg := range []string{`{"tokenizer_class": "CohereTokenizerFast", "bos_token": null}`,
		`{"tokenizer_class": "LlamaTokenizerFast", "add_eos_token": true, "eos_token": null}`} {
		if _, err := FromJSON(d.bytes(t), []byte(cfg)); err == nil || !strings.Contains(err.Error(), "is null but add_") {
			t.Errorf("%s: err = %v, want a null token refused", cfg, err)
		}
	}
	// Gemma's default bos_token is <bos>, which this vocabulary lacks.
	_, err := FromJSON(d.bytes(t), []byte(`{"tokenizer_class": "GemmaTokenizer"}`))
	if err == nil || !strings.Contains(err.Error(), "bos_token") || !strings.Contains(err.Error(), TokenizerConfigFile) {
		t.Fatalf("a missing bos_token: err = %v, want one naming %s's bos_token", err, TokenizerConfigFile)
	}
}
