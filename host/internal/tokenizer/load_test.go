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

// tinyTokenizer is a byte-level BPE tokenizer.json: the 256 byte
// characters, "he" merged, <s> and </s> added around a sequence.
func tinyTokenizer(t *testing.T, modelType string) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[pretokenizerBytesChar(uint8(b))] = b
	}
	vocab["he"] = 256
	special := func(id int, s string) map[string]any {
		return map[string]any{"id": id, "content": s, "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false}
	}
	doc := map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{special(257, "<s>"), special(258, "</s>")},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{
			"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0}},
			},
			"pair": []any{},
			"special_tokens": map[string]any{
				"<s>":  map[string]any{"id": "<s>", "ids": []int{257}, "tokens": []string{"<s>"}},
				"</s>": map[string]any{"id": "</s>", "ids": []int{258}, "tokens": []string{"</s>"}},
			},
		},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model":   map[string]any{"type": modelType, "vocab": vocab, "merges": []string{"h e"}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// modelDir writes a model directory: files maps a name to its content.
func modelDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadTiny(t *testing.T) {
	tmplFile := filepath.Join(t.TempDir(), "chat.jinja")
	os.WriteFile(tmplFile, []byte("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"), 0o644)
	dir := modelDir(t, map[string]string{
		TokenizerFile:        string(tinyTokenizer(t, "BPE")),
		TokenizerConfigFile:  `{"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>", "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}]}`,
		GenerationConfigFile: `{"eos_token_id": [258, 104]}`,
	})

	tok, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("hehe <s>x", true)
	if err != nil {
		t.Fatal(err)
	}
	// <s>, "he" twice, " " (Ġ = byte 32), <s>, "x" (byte 120), </s>
	if want := []uint32{257, 256, 256, 32, 257, 120, 258}; !slices.Equal(ids, want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	if got, _ := tok.Decode(ids, true); got != "hehe x" {
		t.Fatalf("Decode(skip special) = %q", got)
	}
	if got, _ := tok.Decode(ids, false); got != "<s>hehe <s>x</s>" {
		t.Fatalf("Decode = %q", got)
	}
	if _, err := tok.Decode([]uint32{9999}, false); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("Decode(unknown id) err = %v, want one naming the id", err)
	}
	if got := tok.EOSTokenIDs(); !slices.Equal(got, []uint32{258, 104}) {
		t.Fatalf("EOSTokenIDs() = %v, want [258 104] (eos_token, then generation_config's list)", got)
	}
	// The "default" of a list of named templates.
	if got, err := tok.RenderChat([]Message{{Role: "user", Content: "hi"}}, false); err != nil || got != "<s>hi" {
		t.Fatalf("RenderChat = %q, %v", got, err)
	}

	// A chat template file replaces the config's.
	tok, err = Load(dir, tmplFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tok.RenderChat([]Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s>[system]be brief</s>[user]hi</s>[assistant]"; got != want {
		t.Fatalf("RenderChat with a template file = %q, want %q", got, want)
	}

	// raise_exception's message comes back.
	os.WriteFile(tmplFile, []byte(`{{ raise_exception("Only user and assistant roles are supported!") }}`), 0o644)
	tok, err = Load(dir, tmplFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.RenderChat(nil, true); err == nil || !strings.Contains(err.Error(), "Only user and assistant roles are supported!") {
		t.Fatalf("RenderChat err = %v, want the template's raise_exception message", err)
	}

	// Without tokenizer_config.json: no template, no EOS.
	dir = modelDir(t, map[string]string{TokenizerFile: string(tinyTokenizer(t, "BPE"))})
	tok, err = Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if tok.HasChatTemplate() {
		t.Fatal("HasChatTemplate() = true without a template")
	}
	if _, err := tok.RenderChat([]Message{{Role: "user", Content: "hi"}}, true); !errors.Is(err, ErrNoChatTemplate) {
		t.Fatalf("RenderChat without a template: err = %v, want ErrNoChatTemplate", err)
	}
	if got := tok.EOSTokenIDs(); len(got) != 0 {
		t.Fatalf("EOSTokenIDs() = %v, want none", got)
	}
}

// Load's errors name the file and the field.
func TestLoadErrors(t *testing.T) {
	good := string(tinyTokenizer(t, "BPE"))
	for _, c := range []struct {
		name     string
		files    map[string]string
		template string
		want     []string
	}{
		{"no tokenizer.json", map[string]string{}, "", []string{TokenizerFile}},
		{"not JSON", map[string]string{TokenizerFile: "{"}, "", []string{TokenizerFile}},
		{"unsupported model", map[string]string{TokenizerFile: string(tinyTokenizer(t, "Unigram"))}, "", []string{TokenizerFile, "model.type", "Unigram"}},
		{"unsupported post-processor", map[string]string{TokenizerFile: strings.Replace(good, `"TemplateProcessing"`, `"Mystery"`, 1)}, "", []string{TokenizerFile, "post_processor", "Mystery"}},
		{"chat_template not a string", map[string]string{TokenizerFile: good, TokenizerConfigFile: `{"chat_template": 42}`}, "", []string{TokenizerConfigFile, "chat_template"}},
		{"chat_template syntax", map[string]string{TokenizerFile: good, TokenizerConfigFile: `{"chat_template": "{% if %}"}`}, "", []string{TokenizerConfigFile, "chat_template"}},
		{"eos_token unknown", map[string]string{TokenizerFile: good, TokenizerConfigFile: `{"eos_token": "<|nope|>"}`}, "", []string{TokenizerConfigFile, "eos_token", "<|nope|>"}},
		{"eos_token malformed", map[string]string{TokenizerFile: good, TokenizerConfigFile: `{"eos_token": 7}`}, "", []string{TokenizerConfigFile, "eos_token"}},
		{"eos_token_id malformed", map[string]string{TokenizerFile: good, GenerationConfigFile: `{"eos_token_id": "x"}`}, "", []string{GenerationConfigFile, "eos_token_id"}},
		{"chat template file missing", map[string]string{TokenizerFile: good}, "/nonexistent/chat.jinja", []string{"/nonexistent/chat.jinja"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(modelDir(t, c.files), c.template)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load err = %q, want it to name %q", err, w)
				}
			}
		})
	}
}

// A decoder whose output for a token depends on the ones before it
// (SentencePiece's Metaspace drops the first token's leading space) still
// streams Decode's text: each Next decodes its tokens after the previous.
func TestDecoderKeepsContext(t *testing.T) {
	doc := `{"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null,
		"decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
		"model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0, "\u2581Hello": 1, "\u2581world": 2, "!": 3}, "merges": []}}`
	tok, err := Load(modelDir(t, map[string]string{TokenizerFile: doc}), "")
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{1, 2, 3, 2}
	want, err := tok.Decode(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	if want != "Hello world! world" {
		t.Fatalf("Decode = %q", want)
	}
	d := tok.NewDecoder(false, nil)
	var got strings.Builder
	for _, id := range ids {
		got.WriteString(d.Next([]uint32{id}))
	}
	got.WriteString(d.Flush())
	if got.String() != want {
		t.Fatalf("streamed %q, want %q", got.String(), want)
	}
}

// pretokenizerBytesChar is GPT-2's byte-level character for b: printable
// Latin-1 bytes are themselves, the others 256 and up in byte order.
func pretokenizerBytesChar(b uint8) string {
	printable := func(c int) bool { return c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE }
	if printable(int(b)) {
		return string(rune(b))
	}
	n := 0
	for c := range int(b) {
		if !printable(c) {
			n++
		}
	}
	return string(rune(256 + n))
}
