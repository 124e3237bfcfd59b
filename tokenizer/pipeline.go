package tokenizer

// The pipeline's stages, each built from its JSON object by the
// constructor in its own file (normalize.go, pretokenize.go, bpe.go,
// postprocess.go, decode.go), which returns a *FieldError for what it
// does not support. Paths in errors are given by the caller as prefix.

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

// decoderStep is one decoder of the chain: the Rust library's
// decode_chain, tokens in, tokens (strings) out.
type decoderStep interface {
	decodeChain(tokens []string) []string
}
