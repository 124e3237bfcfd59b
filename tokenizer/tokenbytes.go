package tokenizer

import "strings"

// TokenBytes returns id's own bytes and its text, as a logprob shows one
// token: the decoder chain run on the token alone, before its bytes become
// text. A byte-level or byte-fallback token that is part of a character
// gives that part of it (its text then ends in U+FFFD, one per maximal
// invalid subpart, as Python's decode with errors="replace" gives it), and
// a SentencePiece token keeps its leading space, which Decode's Strip (or
// Metaspace's first-token rule) would remove. An added token gives its
// content. ok is false for an id outside the vocabulary.
func (t *Tokenizer) TokenBytes(id uint32) (raw []byte, text string, ok bool) {
	tok, added, ok := t.detok.lookup(id)
	if !ok || (!added && tok == "") {
		return nil, "", false
	}
	if t.detok.dec != nil {
		tok = strings.Join(rawChain(t.detok.dec).decodeChain([]string{tok}), "")
	}
	return []byte(tok), lossyUTF8([]byte(tok)), true
}

// rawChain is d for one token's bytes: byte-level and byte-fallback steps
// keep invalid bytes, Metaspace keeps a first token's space and Strip is
// left out.
func rawChain(d decoderStep) decoderStep {
	switch d := d.(type) {
	case byteLevelDecoder:
		return rawByteLevel{}
	case byteFallbackDecoder:
		return rawByteFallback{}
	case metaspaceDecoder:
		d.dropFirst = false
		return d
	case stripDecoder:
		return sequenceDecoder{}
	case sequenceDecoder:
		seq := make(sequenceDecoder, len(d))
		for i, m := range d {
			seq[i] = rawChain(m)
		}
		return seq
	}
	return d
}

// rawByteLevel is byteLevelDecoder without the conversion to valid text.
type rawByteLevel struct{}

func (rawByteLevel) decodeChain(tokens []string) []string {
	var buf []byte
	for _, tok := range tokens {
		buf = appendByteLevel(buf, tok)
	}
	return []string{string(buf)}
}

// rawByteFallback is byteFallbackDecoder keeping each "<0xNN>" token's
// byte as it is.
type rawByteFallback struct{}

func (rawByteFallback) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		if b, ok := byteToken(tok); ok {
			tok = string([]byte{b})
		}
		out[i] = tok
	}
	return out
}
