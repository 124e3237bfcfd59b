package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// File names inside a model directory.
const (
	TokenizerFile       = "tokenizer.json"
	TokenizerConfigFile = "tokenizer_config.json"
)

// encoding is what Encode needs, built by FromJSON.
type encoding struct {
	added *addedVocab
	norm  normalizer    // nil: none
	pre   preTokenizer  // nil: none
	model *bpe          // the model (BPE only)
	post  postProcessor // nil: none
	eos   []uint32      // tokenizer_config.json's eos_token
}

// fileJSON is tokenizer.json's top level; other keys are ignored, as the
// Rust library ignores them.
type fileJSON struct {
	Version       *string         `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   json.RawMessage `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// tokenizerConfig is what tokenizer_config.json says about encoding.
type tokenizerConfig struct {
	TokenizerClass string
	AddBOS, AddEOS *bool
	BOS, EOS       *string // nil: absent; "" for null
}

// Load reads dir/tokenizer.json and, when there is one,
// dir/tokenizer_config.json. Errors name the file and the field.
func Load(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, TokenizerConfigFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromJSON(tj, cj)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", dir, err)
	}
	return t, nil
}

// FromJSON builds a Tokenizer from tokenizer.json's content and
// tokenizer_config.json's (nil or empty: none). Refused fields come back
// as a *FieldError naming the JSON path.
func FromJSON(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("%s: not JSON: %w", TokenizerFile, err)
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	cfg, err := readConfig(configJSON)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{}
	if err := t.enc.build(&f); err != nil {
		return nil, err
	}
	if err := t.enc.setPostProcessor(&f, cfg, t); err != nil {
		return nil, err
	}
	if err := t.fillDetok(&f); err != nil {
		return nil, err
	}
	if cfg.EOS != nil && *cfg.EOS != "" {
		id, ok := t.TokenID(*cfg.EOS)
		if !ok {
			return nil, fmt.Errorf("%s: eos_token %q: not in the vocabulary", TokenizerConfigFile, *cfg.EOS)
		}
		t.enc.eos = []uint32{id}
	}
	return t, nil
}

// check refuses a top level the package does not run: another version,
// truncation or padding (a server never truncates or pads a prompt).
func (f *fileJSON) check() error {
	if f.Version != nil && *f.Version != "1.0" {
		return &FieldError{Field: "version", Value: fmt.Sprintf("%q", *f.Version), Reason: `not supported ("1.0" is)`}
	}
	for _, x := range []struct {
		name string
		raw  json.RawMessage
	}{{"truncation", f.Truncation}, {"padding", f.Padding}} {
		if len(x.raw) != 0 && string(x.raw) != "null" {
			return &FieldError{Field: x.name, Reason: "not supported (null is: vigil neither truncates nor pads a prompt)"}
		}
	}
	if len(f.Model) == 0 || string(f.Model) == "null" {
		return &FieldError{Field: "model", Reason: "missing"}
	}
	return nil
}

// build builds the model and the stages before it.
func (e *encoding) build(f *fileJSON) error {
	var err error
	if e.model, err = buildBPE(f.Model, "model"); err != nil {
		return err
	}
	if e.norm, err = buildNormalizer(f.Normalizer, "normalizer"); err != nil {
		return err
	}
	if e.pre, err = buildPreTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return err
	}
	e.added, err = newAddedVocab(f.AddedTokens, "added_tokens", e.model, e.norm)
	return err
}

// setPostProcessor takes the one transformers builds from the config for
// the classes it rebuilds (postprocess.go), else tokenizer.json's.
func (e *encoding) setPostProcessor(f *fileJSON, cfg *tokenizerConfig, v vocab) error {
	p, ok, err := configPostProcessor(cfg, v)
	if err != nil {
		return err
	}
	if !ok {
		p, err = buildPostProcessor(f.PostProcessor, "post_processor", v)
	}
	e.post = p
	return err
}

// fillDetok fills the id → token table (added tokens by the form the Rust
// library decodes: normalized ones as normalized), the special set and
// the decoder.
func (t *Tokenizer) fillDetok(f *fileJSON) error {
	v := t.enc.model.vocab
	n := 0
	for k := range v.len() {
		_, id := v.entry(k)
		n = max(n, int(id)+1)
	}
	for id := range t.enc.added.byID {
		n = max(n, int(id)+1)
	}
	d := &t.detok
	d.vocab, d.byID = v, make([]uint32, n)
	d.special = map[uint32]bool{}
	for k := range v.len() {
		tok, id := v.entry(k)
		if old := d.byID[id]; old != 0 {
			prev, _ := v.entry(int(old - 1))
			return &FieldError{Field: "model.vocab", Value: fmt.Sprint(id), Reason: fmt.Sprintf("this id is given to two tokens (%q and %q)", min(tok, prev), max(tok, prev))}
		}
		d.byID[id] = uint32(k + 1)
	}
	for id, a := range t.enc.added.byID {
		d.byID[id] = addedBit | uint32(len(d.forms))
		d.forms = append(d.forms, a.form)
		if a.special {
			d.special[id] = true
		}
	}
	var err error
	d.dec, err = buildDecoder(f.Decoder, "decoder")
	return err
}

// Encode returns text's token ids. addSpecialTokens applies the
// post-processor's special tokens (a plain prompt: true; a rendered chat
// prompt, which holds them already: false, as vLLM does).
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) ([]uint32, error) {
	if !utf8.ValidString(text) {
		return nil, errors.New("tokenizer: encode: the text is not valid UTF-8")
	}
	e := &t.enc
	var ids []uint32
	for _, s := range e.added.split(text, e.norm) {
		if s.tok != nil {
			ids = append(ids, s.tok.id)
			continue
		}
		pieces := []piece{{text: s.text, first: s.first}}
		if e.pre != nil {
			pieces = e.pre.preTokenize(pieces)
		}
		for _, p := range pieces {
			ids = append(ids, e.model.tokenize(p.text)...)
		}
	}
	if e.post != nil {
		ids = e.post.process(ids, addSpecialTokens)
	}
	return ids, nil
}

// TokenID returns the id of a token (an added token's content or a
// vocabulary entry), and whether there is one.
func (t *Tokenizer) TokenID(token string) (uint32, bool) {
	return t.id(token)
}

// id implements vocab for the post-processors' factories.
func (t *Tokenizer) id(token string) (uint32, bool) {
	if a, ok := t.enc.added.byContent[token]; ok {
		return a.id, true
	}
	return t.enc.model.vocab.get(token)
}

// Token returns the token of an id, as decoding sees it, and whether
// there is one.
func (t *Tokenizer) Token(id uint32) (string, bool) {
	s, added, ok := t.detok.lookup(id)
	return s, ok && (added || s != "")
}

// VocabSize is the number of ids: the highest id (added tokens included)
// plus one.
func (t *Tokenizer) VocabSize() int { return len(t.detok.byID) }

// EOSTokenIDs returns the ids that end a generation: tokenizer_config.json's
// eos_token (none without one).
func (t *Tokenizer) EOSTokenIDs() []uint32 { return append([]uint32(nil), t.enc.eos...) }

// IsSpecial says whether id is an added token marked special (skipped by
// decoding with skipSpecialTokens).
func (t *Tokenizer) IsSpecial(id uint32) bool { return t.detok.special[id] }

// readConfig reads tokenizer_config.json's encoding fields.
func readConfig(data []byte) (*tokenizerConfig, error) {
	cfg := &tokenizerConfig{}
	if len(data) == 0 {
		return cfg, nil
	}
	var raw struct {
		TokenizerClass *string         `json:"tokenizer_class"`
		AddBOS         *bool           `json:"add_bos_token"`
		AddEOS         *bool           `json:"add_eos_token"`
		BOS            json.RawMessage `json:"bos_token"`
		EOS            json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", TokenizerConfigFile, err)
	}
	if raw.TokenizerClass != nil {
		cfg.TokenizerClass = *raw.TokenizerClass
	}
	cfg.AddBOS, cfg.AddEOS = raw.AddBOS, raw.AddEOS
	var err error
	if cfg.BOS, err = tokenContent(raw.BOS, "bos_token"); err != nil {
		return nil, err
	}
	cfg.EOS, err = tokenContent(raw.EOS, "eos_token")
	return cfg, err
}

// tokenContent reads a special token: absent (nil), null (""), a string,
// or an AddedToken object {"content": ...}.
func tokenContent(v json.RawMessage, field string) (*string, error) {
	if len(v) == 0 {
		return nil, nil
	}
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			s = new(string)
		}
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(v, &obj); err != nil || obj.Content == nil {
		return nil, fmt.Errorf("%s: %s: a string, null or an object with content expected", TokenizerConfigFile, field)
	}
	return obj.Content, nil
}
