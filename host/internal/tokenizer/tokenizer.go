// Package tokenizer gives vigil a model's own tokenization and chat
// template, read from a Hugging Face model directory: tokenizer.json
// (required) through vigil's own module github.com/vigilhq/vigil/tokenizer,
// and
// tokenizer_config.json (optional: chat_template, bos_token, eos_token...)
// rendered with vigil's own template engine (host/internal/jinja) as
// transformers' apply_chat_template does. Pure Go, no cgo.
//
// Encode and Decode follow the Rust tokenizers library that transformers'
// fast tokenizers use, checked against @lenml/tokenizers (transformers.js)
// for Llama 3, Qwen 3 and Gemma 3 (testdata/). Decode does not apply
// clean_up_tokenization_spaces, as vLLM's incremental detokenizer does not,
// so that Decode(Encode(s)) == s and streamed text equals the whole.
//
// Use in a worker: prompt, _ := t.RenderChat(msgs, true), then
// t.Encode(prompt, false) (the template wrote bos_token itself); a plain
// completion prompt is t.Encode(text, true). For output, one
// t.NewDecoder(true, promptIDs) per request, Next(ids) per engine chunk, Flush at the
// end; stop when an id is in t.EOSTokenIDs().
//
// Chat templates render in host/internal/jinja, which follows jinja2 3.1
// in transformers' environment (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loop controls, tojson, raise_exception,
// strftime_now) and refuses, naming it, what it does not render exactly.
//
// A Tokenizer is safe for concurrent use; a Decoder is not.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/vigilhq/vigil/host/internal/jinja"
	vtok "github.com/vigilhq/vigil/tokenizer"
)

// Message is one chat turn: Role is "system", "user", "assistant",
// "tool" or another role the template knows; Content is its text; Name,
// when not "", the speaker's name (OpenAI's name), given to the template
// as the message's "name" key, as transformers passes it. Its JSON is
// OpenAI's message's.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
	// ToolCalls are an assistant turn's function calls (message.tool_calls).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool turn answers ("" for none).
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's reasoning ("" for none),
	// which templates such as Qwen3's render for turns after the last
	// user turn.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Tokenizer encodes text to token ids and back, and renders chat prompts.
type Tokenizer struct {
	tk *vtok.Tokenizer // tokenizer.json: encoding and decoding

	template     *jinja.Template // nil: no chat template
	templateSrc  string          // its text
	templateVars map[string]any  // bos_token, eos_token... as transformers passes them
	// developer: the template's source mentions the developer role, so
	// such messages pass to it unchanged (else they render as system).
	developer bool
	eos       []uint32
}

// File names inside a model directory.
const (
	TokenizerFile        = "tokenizer.json"
	TokenizerConfigFile  = "tokenizer_config.json"
	GenerationConfigFile = "generation_config.json"
)

// CheckChatTemplate reads and compiles a Jinja chat template file, so that
// a bad one is found at start-up, before any tokenizer is loaded. Errors
// name the file.
func CheckChatTemplate(file string) error {
	_, _, err := compileTemplateFile(file)
	return err
}

func compileTemplateFile(file string) (*jinja.Template, string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("tokenizer: chat template: %w", err)
	}
	tmpl, err := jinja.Compile(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("tokenizer: %s: %w", file, err)
	}
	return tmpl, string(b), nil
}

// Load reads dir/tokenizer.json (required), dir/tokenizer_config.json and
// dir/generation_config.json (both optional). chatTemplateFile, when not
// "", is a Jinja chat template file that replaces the config's
// chat_template (vLLM's --chat-template). Errors name the file and field.
func Load(dir, chatTemplateFile string) (*Tokenizer, error) {
	tk, err := vtok.Load(dir)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{tk: tk}
	cfg, err := readConfig(filepath.Join(dir, TokenizerConfigFile))
	if err != nil {
		return nil, err
	}
	src := cfg.chatTemplate
	if chatTemplateFile != "" {
		if t.template, src, err = compileTemplateFile(chatTemplateFile); err != nil {
			return nil, err
		}
	} else if cfg.chatTemplate != "" {
		if t.template, err = jinja.Compile(cfg.chatTemplate); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: field chat_template: %w", filepath.Join(dir, TokenizerConfigFile), err)
		}
	}
	t.developer = strings.Contains(src, RoleDeveloper)
	if t.template != nil {
		t.templateSrc = src
	}
	t.templateVars = cfg.specialTokens

	gen, err := readGenerationEOS(filepath.Join(dir, GenerationConfigFile))
	if err != nil {
		return nil, err
	}
	t.eos = mergeIDs(tk.EOSTokenIDs(), gen)
	// Reading tokenizer.json (up to 33 MB, and its parse) grows the heap
	// far past what the Tokenizer keeps; the runtime would return the
	// difference to the OS only minutes later, so a loaded worker would
	// idle at several times its size. Once per load, at start.
	debug.FreeOSMemory()
	return t, nil
}

// Encode returns text's token ids. addSpecialTokens applies
// tokenizer.json's post_processor (Gemma's adds <bos>; Llama 3's and
// Qwen's add nothing). A rendered chat prompt already holds its bos_token:
// encode it with addSpecialTokens false, as vLLM does.
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) ([]uint32, error) {
	return t.tk.Encode(text, addSpecialTokens)
}

// Decode returns the text of ids; skipSpecialTokens leaves out added
// tokens marked special (<|eot_id|>, <end_of_turn>...). An id outside the
// vocabulary is an error.
func (t *Tokenizer) Decode(ids []uint32, skipSpecialTokens bool) (string, error) {
	return t.tk.Decode(ids, skipSpecialTokens)
}

// Decoder turns a stream of generated token ids into text incrementally
// (Next per engine chunk, Flush at the end), never part of a character.
// It is not safe for concurrent use.
type Decoder = vtok.Decoder

// NewDecoder returns a streaming decoder for one generation, seeded with
// the prompt's ids (nil for none) so that the first generated token is
// decoded in their context, as vLLM's incremental detokenizer does: a
// SentencePiece-style decoder then keeps its leading space.
func (t *Tokenizer) NewDecoder(skipSpecialTokens bool, promptIDs []uint32) *Decoder {
	return t.tk.NewDecoder(skipSpecialTokens, promptIDs)
}

// EOSTokenIDs returns the ids that end a generation: eos_token of
// tokenizer_config.json, then eos_token_id of generation_config.json (a
// number or a list), without repeats; empty when neither file names one.
func (t *Tokenizer) EOSTokenIDs() []uint32 {
	return append([]uint32(nil), t.eos...)
}

// TokenID returns the id of a token (an added token's content, or a
// vocabulary entry), and whether there is one.
func (t *Tokenizer) TokenID(token string) (uint32, bool) { return t.tk.TokenID(token) }

// SpecialTokenID returns the id of the added token marked special whose
// content is content (Llama 3.1's "<|python_tag|>", Mistral's
// "[TOOL_CALLS]"), and whether there is one: the markers a decoder that
// skips special tokens would leave out of the text.
func (t *Tokenizer) SpecialTokenID(content string) (uint32, bool) {
	id, ok := t.tk.TokenID(content)
	if !ok || !t.tk.IsSpecial(id) {
		return 0, false
	}
	return id, true
}

// TemplateSource returns the chat template's text ("" without one), for
// choosing the tool-call and reasoning parsers from the markers it holds.
func (t *Tokenizer) TemplateSource() string { return t.templateSrc }

// Token returns the vocabulary entry of an id (Llama 3's "Ġworld", an
// added token's content), as transformers' convert_ids_to_tokens, and
// whether the id has one.
func (t *Tokenizer) Token(id uint32) (string, bool) { return t.tk.Token(id) }

// mergeIDs is a's ids then b's, without repeats.
func mergeIDs(a, b []uint32) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	for _, id := range append(append([]uint32(nil), a...), b...) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

type tokenizerConfig struct {
	chatTemplate  string
	specialTokens map[string]any // bos_token... as strings; additional_special_tokens as a list
}

// readConfig reads tokenizer_config.json; a missing file is an empty one.
func readConfig(path string) (tokenizerConfig, error) {
	cfg := tokenizerConfig{specialTokens: map[string]any{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return cfg, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	if ct, ok := raw["chat_template"]; ok {
		if cfg.chatTemplate, err = chatTemplate(ct); err != nil {
			return cfg, fmt.Errorf("tokenizer: %s: field chat_template: %w", path, err)
		}
	}
	// transformers passes its special_tokens_map to the template.
	for _, k := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		s, err := tokenContent(v)
		if err != nil {
			return cfg, fmt.Errorf("tokenizer: %s: field %s: %w", path, k, err)
		}
		if s != "" {
			cfg.specialTokens[k] = s
		}
	}
	if v, ok := raw["additional_special_tokens"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil && string(v) != "null" {
			return cfg, fmt.Errorf("tokenizer: %s: field additional_special_tokens: a list of tokens expected", path)
		}
		out := make([]any, 0, len(list))
		for i, e := range list {
			s, err := tokenContent(e)
			if err != nil {
				return cfg, fmt.Errorf("tokenizer: %s: field additional_special_tokens[%d]: %w", path, i, err)
			}
			out = append(out, s)
		}
		cfg.specialTokens["additional_special_tokens"] = out
	}
	return cfg, nil
}

// tokenContent reads a special token: a string, null, or an AddedToken
// object {"content": ...}.
func tokenContent(v json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(v, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("a string, null or an object with content expected")
	}
	return *obj.Content, nil
}

// chatTemplate reads chat_template: a string, or a list of {name,
// template} from which transformers takes "default".
func chatTemplate(v json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(v, &list); err != nil {
		return "", fmt.Errorf("a string or a list of {name, template} expected")
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", fmt.Errorf("no template named \"default\" in the list")
}

// readGenerationEOS reads eos_token_id from generation_config.json; a
// missing file or field is none.
func readGenerationEOS(path string) ([]uint32, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var raw struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	if len(raw.EOS) == 0 || string(raw.EOS) == "null" {
		return nil, nil
	}
	var one uint32
	if err := json.Unmarshal(raw.EOS, &one); err == nil {
		return []uint32{one}, nil
	}
	var many []uint32
	if err := json.Unmarshal(raw.EOS, &many); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: field eos_token_id: a token id or a list of token ids expected", path)
	}
	return many, nil
}

// TokenBytes returns one token's own bytes and text, as a logprob shows
// it (vtok.Tokenizer.TokenBytes); ok is false for an id outside the
// vocabulary.
func (t *Tokenizer) TokenBytes(id uint32) (raw []byte, text string, ok bool) {
	return t.tk.TokenBytes(id)
}
