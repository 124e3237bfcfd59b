package tokenizer

import "unicode/utf8"

// maxHeld is how many tokens Next holds back waiting for a character's
// last bytes.
const maxHeld = 8

// Decoder turns a stream of generated token ids into text incrementally:
// the text of all ids given so far, less what was returned before, held
// back while it ends in an incomplete character. The concatenation of
// every Next and the final Flush equals Decode of all the ids, however
// they were split between calls.
//
// It decodes a short window of tokens (the ones since the last complete
// character, and those before it back to the previous one) the way vLLM's
// incremental detokenizer does, so decoders whose output for a token
// depends on its neighbours (byte fallback, byte-level BPE) stay exact.
// A Decoder is for one stream; it is not safe for concurrent use.
type Decoder struct {
	t    *Tokenizer
	skip bool
	toks []string // the window: tokens from prefix on
	read int      // toks[:read] have been returned as text
}

// NewDecoder returns a Decoder for one generation; skipSpecialTokens
// leaves out added tokens marked special, as Decode does.
func (t *Tokenizer) NewDecoder(skipSpecialTokens bool) *Decoder {
	return &Decoder{t: t, skip: skipSpecialTokens}
}

// Next adds ids and returns the text they complete, "" when none (an id
// outside the vocabulary adds nothing). A multi-byte character split
// across tokens is returned whole, once its last byte has come.
func (d *Decoder) Next(ids []uint32) string {
	for _, id := range ids {
		if d.skip && d.t.special[int(id)] {
			continue
		}
		tok, ok := d.t.token(id)
		if !ok {
			continue
		}
		d.toks = append(d.toks, tok)
	}
	if d.read == len(d.toks) {
		return ""
	}
	prefix := d.t.decodeTokens(d.toks[:d.read])
	text := d.t.decodeTokens(d.toks)
	if len(text) <= len(prefix) {
		return ""
	}
	if r, _ := utf8.DecodeLastRuneInString(text); r == utf8.RuneError {
		// An incomplete character: wait for its next bytes, but not
		// for ever: past maxHeld tokens, the text up to the last 4
		// (a character has at most 4 bytes) is bytes that are not
		// UTF-8, which Decode gives as U+FFFD too.
		if len(d.toks)-d.read <= maxHeld {
			return ""
		}
		cut := len(d.toks) - 4
		for c := len(d.toks) - 1; c > cut; c-- {
			if r, _ := utf8.DecodeLastRuneInString(d.t.decodeTokens(d.toks[:c])); r != utf8.RuneError {
				cut = c
				break
			}
		}
		text = d.t.decodeTokens(d.toks[:cut])
		if len(text) <= len(prefix) {
			return ""
		}
		out := text[len(prefix):]
		d.toks, d.read = d.toks[d.read:], cut-d.read
		return out
	}
	out := text[len(prefix):]
	// The tokens just returned become the next window's prefix.
	d.toks = d.toks[d.read:]
	d.read = len(d.toks)
	return out
}

// Flush returns the text held back (an incomplete character at the end of
// the stream comes out as U+FFFD, as Decode gives it) and resets the
// Decoder for a new stream.
func (d *Decoder) Flush() string {
	var out string
	if d.read < len(d.toks) {
		prefix := d.t.decodeTokens(d.toks[:d.read])
		if text := d.t.decodeTokens(d.toks); len(text) > len(prefix) {
			out = text[len(prefix):]
		}
	}
	d.toks, d.read = nil, 0
	return out
}
