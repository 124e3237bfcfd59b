// Package tokenizer encodes text to token ids and decodes them back as a
// Hugging Face tokenizer.json says, exactly as the Rust tokenizers library
// (which transformers' fast tokenizers and the engines use) does for every
// file it accepts, and refuses at load, naming the JSON field, every file
// it would not handle exactly.
//
// Why a module of its own: no Go library reads tokenizer.json exactly
// (sugarme/tokenizer, which vigil used before, ends the process on inputs
// it mishandles), and what the model sees must be what its own tokenizer
// gives. Its only dependencies are dlclark/regexp2 (the files' Oniguruma
// patterns, lookahead included) and golang.org/x/text (the Unicode
// normalization forms).
//
// The pipeline is the Rust library's: added tokens are split out of the
// input (those marked normalized after normalization), each remaining
// segment is normalized, pre-tokenized into pieces, each piece encoded by
// the model (BPE: byte-level, or SentencePiece-style with byte fallback),
// and the post-processor adds the special tokens around the sequence.
// Decoding maps ids to tokens and runs the decoder chain.
//
// Nothing in the package ends the process: a malformed or unsupported
// file is an error at load, and no input text can make Encode or Decode
// panic (fuzzed).
//
// A Tokenizer is safe for concurrent use; a Decoder is not.
package tokenizer
