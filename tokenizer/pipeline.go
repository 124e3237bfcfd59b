package tokenizer

import (
	"encoding/json"
	"fmt"
)

// Tokenizer encodes text to token ids and decodes them, as one
// tokenizer.json says. Load builds it; it is safe for concurrent use.
type Tokenizer struct {
	enc   encoding    // what Encode needs (tokenizer.go)
	detok detokenizer // what Decode and Decoder need (decoder.go)
}

// detokenizer is what decoding needs, filled by Load.
type detokenizer struct {
	vocab   *vocabTable     // the model's, shared
	byID    []uint32        // id → 1 + a vocab entry, addedBit | an index in forms, or 0 (no token)
	forms   []string        // the added tokens' forms
	special map[uint32]bool // the ids of added tokens marked special
	dec     decoderStep     // nil: the tokens joined with " ", as the Rust library does
}

// The pipeline's stages: one small type per JSON "type", behind its
// stage's interface, built by the factory its file registers (normalize.go,
// pretokenize.go, bpe.go, postprocess.go, decode.go). A factory is given
// the JSON object and its path, for the *FieldError of what it does not
// support.

// normalizer rewrites one segment of input text (between added tokens).
type normalizer interface {
	normalize(s string) string
}

// piece is a pre-token: text to encode, and whether it starts at the
// input's first byte (Metaspace's prepend_scheme "first" needs that: a
// segment after an added token does not).
type piece struct {
	text  string
	first bool
}

// preTokenizer splits pieces into smaller pieces, as the Rust library's
// pre_tokenize does on a PreTokenizedString.
type preTokenizer interface {
	preTokenize(pieces []piece) []piece
}

// model encodes one pre-token.
type model interface {
	tokenize(text string) []uint32
}

// postProcessor adds the special tokens around one sequence's ids.
type postProcessor interface {
	process(ids []uint32, addSpecial bool) []uint32
}

// decoderStep is one decoder of the chain: the Rust library's
// decode_chain, tokens in, tokens (strings) out.
type decoderStep interface {
	decodeChain(tokens []string) []string
}

// vocab is what a post-processor's or decoder's factory may need to look
// up: a token's id (added tokens included).
type vocab interface {
	id(token string) (uint32, bool)
}

// The factories, by the JSON "type" they build; each stage's file fills
// its map in an init function.
type (
	normalizerFactory    func(obj json.RawMessage, path string) (normalizer, error)
	preTokenizerFactory  func(obj json.RawMessage, path string) (preTokenizer, error)
	postProcessorFactory func(obj json.RawMessage, path string, v vocab) (postProcessor, error)
	decoderFactory       func(obj json.RawMessage, path string) (decoderStep, error)
)

var (
	normalizerTypes    = map[string]normalizerFactory{}
	preTokenizerTypes  = map[string]preTokenizerFactory{}
	postProcessorTypes = map[string]postProcessorFactory{}
	decoderTypes       = map[string]decoderFactory{}
)

// typeOf reads obj's "type", the key its factory is registered under.
func typeOf(obj json.RawMessage, path string) (string, error) {
	var t struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(obj, &t); err != nil {
		return "", &FieldError{Field: path, Reason: "not a JSON object: " + err.Error()}
	}
	if t.Type == nil {
		return "", &FieldError{Field: path + ".type", Reason: "missing"}
	}
	return *t.Type, nil
}

// build builds obj (at path) with the factory registered for its type; a
// JSON null is no stage (the zero T).
func build[T any, F any](obj json.RawMessage, path string, types map[string]F, stage string, call func(F) (T, error)) (T, error) {
	var zero T
	if len(obj) == 0 || string(obj) == "null" {
		return zero, nil
	}
	typ, err := typeOf(obj, path)
	if err != nil {
		return zero, err
	}
	f, ok := types[typ]
	if !ok {
		return zero, &FieldError{Field: path + ".type", Value: fmt.Sprintf("%q", typ), Reason: "this " + stage + " is not supported (see the module's docs for the list)"}
	}
	return call(f)
}

// buildNormalizer builds a normalizer object (Sequence's members too).
func buildNormalizer(obj json.RawMessage, path string) (normalizer, error) {
	return build(obj, path, normalizerTypes, "normalizer", func(f normalizerFactory) (normalizer, error) { return f(obj, path) })
}

// buildPreTokenizer builds a pre-tokenizer object.
func buildPreTokenizer(obj json.RawMessage, path string) (preTokenizer, error) {
	return build(obj, path, preTokenizerTypes, "pre-tokenizer", func(f preTokenizerFactory) (preTokenizer, error) { return f(obj, path) })
}

// buildPostProcessor builds a post-processor object.
func buildPostProcessor(obj json.RawMessage, path string, v vocab) (postProcessor, error) {
	return build(obj, path, postProcessorTypes, "post-processor", func(f postProcessorFactory) (postProcessor, error) { return f(obj, path, v) })
}

// buildDecoder builds a decoder object.
func buildDecoder(obj json.RawMessage, path string) (decoderStep, error) {
	return build(obj, path, decoderTypes, "decoder", func(f decoderFactory) (decoderStep, error) { return f(obj, path) })
}
