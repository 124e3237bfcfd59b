package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids, as the Rust library's decode gives it:
// each id's token (an added token's content included) through the
// decoder chain, joined; skipSpecialTokens leaves out added tokens
// marked special (<|eot_id|>, <end_of_turn>...). An id outside the
// vocabulary is an error (the Rust library drops it silently).
func (t *Tokenizer) Decode(ids []uint32, skipSpecialTokens bool) (string, error) {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.detok.token(id)
		if !ok {
			return "", fmt.Errorf("tokenizer: decode: token id %d is not in the vocabulary (ids 0 to %d)", id, len(t.detok.byID)-1)
		}
		if skipSpecialTokens && t.detok.special[id] {
			continue
		}
		toks = append(toks, tok)
	}
	return t.detok.decode(toks), nil
}

// token is id's token; false for an id no token has.
func (d *detokenizer) token(id uint32) (string, bool) {
	s, _, ok := d.lookup(id)
	return s, ok && s != ""
}

// addedBit marks a byID entry that is an added token's.
const addedBit = 1 << 31

// lookup is id's token, whether it is an added token's form, and whether
// the id has one.
func (d *detokenizer) lookup(id uint32) (tok string, added, ok bool) {
	if uint64(id) >= uint64(len(d.byID)) || d.byID[id] == 0 {
		return "", false, false
	}
	e := d.byID[id]
	if e&addedBit != 0 {
		return d.forms[e&^addedBit], true, true
	}
	tok, _ = d.vocab.entry(int(e - 1))
	return tok, false, true
}

// decode runs toks through the chain; without a decoder the tokens are
// joined with spaces, as the Rust library does.
func (d *detokenizer) decode(toks []string) string {
	if d.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(d.dec.decodeChain(toks), "")
}

// contextTokens is how many tokens before the next one's are decoded with
// it: vLLM's initial incremental detokenization offset.
const contextTokens = 5

// maxHeld is how many tokens text ending in U+FFFD is held back for: a
// character has at most 4 bytes, so text held longer is invalid bytes
// (or U+FFFD tokens), not a character in progress; holding it for ever
// would make each token's decoding slower.
const maxHeld = 8

// Decoder turns a stream of generated token ids into text incrementally,
// in the context of the prompt's last tokens, as vLLM's incremental
// detokenizer does (prefix and read offsets into a short window of
// tokens): each new token is decoded with the ones before it, and its
// text is what that adds. So a SentencePiece decoder's Strip, which
// removes a leading space, does not eat the first generated token's space
// ("The capital of France is" continues as " Paris"), and the text is
// decode(prompt + output) minus decode(prompt), the text the engines
// return. Text ending in an incomplete character is held back until the
// next tokens complete it (for at most maxHeld tokens).
//
// Tokens are taken one at a time whatever the split of ids between Next
// calls, so the concatenation of every Next and the final Flush is the
// same for any split. A character cut by the end of the stream comes out
// at Flush as one U+FFFD. With ByteFallback, a run of byte tokens that is
// not valid UTF-8 is decoded as transformers.js gives it (its valid
// characters, one U+FFFD per invalid part), not as
// Decode does (one U+FFFD per byte token of the run, the Rust library's
// rule): text already streamed cannot be taken back.
//
// Stream migration resumes a stream on another worker from its prompt
// and generated ids: NewDecoder seeded with the prompt plus the ids
// generated so far continues the text exactly where the first worker's
// Decoder left off (seeded tokens whose text would still be held back
// are read again, so a character cut by the move is not lost).
//
// A Decoder is for one stream; it is not safe for concurrent use.
type Decoder struct {
	d      *detokenizer // with the chain's ByteFallback lossy
	skip   bool
	keep   map[uint32]bool // special ids not skipped (Keep)
	seed   []uint32        // the prompt's ids, read again by Keep
	begun  bool            // Next has been called
	toks   []string        // the window
	prefix int             // toks[prefix:read] is the context of the next text
	read   int             // toks[:read] have given their text
}

// NewDecoder returns a Decoder for one generation; skipSpecialTokens
// leaves out added tokens marked special, as Decode does. promptTail is
// the prompt's last ids (the last contextTokens+2 are used, more are
// fine; nil for none), or for a resumed stream the prompt's and the
// generated ids.
func (t *Tokenizer) NewDecoder(skipSpecialTokens bool, promptTail []uint32) *Decoder {
	dt := t.detok
	dt.dec = streamingChain(dt.dec)
	d := &Decoder{d: &dt, skip: skipSpecialTokens}
	// Two more, as vLLM takes, in case special tokens are skipped.
	if n := contextTokens + 2; len(promptTail) > n {
		promptTail = promptTail[len(promptTail)-n:]
	}
	d.seed = append([]uint32(nil), promptTail...)
	d.seedWindow()
	return d
}

// seedWindow reads the prompt's ids into the window as its context.
func (d *Decoder) seedWindow() {
	d.toks, d.prefix, d.read = nil, 0, 0
	for _, id := range d.seed {
		if tok, ok := d.tokenOf(id); ok {
			d.toks = append(d.toks, tok)
		}
	}
	d.read = len(d.toks)
	for d.read > 0 && d.held(d.toks[:d.read]) {
		d.read--
	}
	d.prefix = max(d.read-contextTokens, 0)
}

// Keep makes a Decoder that skips special tokens keep ids in its text:
// the markers a tool-call or reasoning parser reads (Llama 3.1's
// <|python_tag|>, Mistral's [TOOL_CALLS], harmony's <|channel|>...),
// while the others (end of turn...) stay out. Called before the first
// Next, it reads the prompt's ids again with ids kept, so that their
// context is the one vLLM gives with those ids not skipped; later, it
// applies to the ids that follow. Ids that are not special change
// nothing.
func (d *Decoder) Keep(ids ...uint32) {
	if d.keep == nil {
		d.keep = map[uint32]bool{}
	}
	for _, id := range ids {
		d.keep[id] = true
	}
	if !d.begun {
		d.seedWindow()
	}
}

// tokenOf is id's token for the stream: false for an id outside the
// vocabulary (it adds nothing, as in vLLM) or a skipped special token.
func (d *Decoder) tokenOf(id uint32) (string, bool) {
	if d.skip && d.d.special[id] && !d.keep[id] {
		return "", false
	}
	return d.d.token(id)
}

// held says whether the text of toks (decoded from the window's prefix
// on) would be held back.
func (d *Decoder) held(toks []string) bool {
	return strings.HasSuffix(d.d.decode(toks[min(d.prefix, len(toks)):]), "\uFFFD")
}

// Next adds ids and returns the text they complete, "" when none.
func (d *Decoder) Next(ids []uint32) string {
	d.begun = true
	var out strings.Builder
	for _, id := range ids {
		out.WriteString(d.step(id))
	}
	return out.String()
}

// step adds one id, as vLLM's detokenize_incrementally does.
func (d *Decoder) step(id uint32) string {
	tok, ok := d.tokenOf(id)
	if !ok {
		return ""
	}
	d.toks = append(d.toks, tok)
	context := d.d.decode(d.toks[d.prefix:d.read])
	text := d.d.decode(d.toks[d.prefix:])
	if len(d.toks)-d.read <= maxHeld && (len(text) <= len(context) || strings.HasSuffix(text, "\uFFFD")) {
		return ""
	}
	var out string
	if len(text) > len(context) {
		out = after(text, context)
	}
	// The tokens just read become the next token's context.
	d.toks = d.toks[d.read:]
	d.prefix, d.read = 0, len(d.toks)
	return out
}

// Flush returns the text held back (a character cut by the end of the
// stream as Decode gives it) and resets the Decoder to a stream with no
// context.
func (d *Decoder) Flush() string {
	var out string
	if d.read < len(d.toks) {
		context := d.d.decode(d.toks[d.prefix:d.read])
		if text := d.d.decode(d.toks[d.prefix:]); len(text) > len(context) {
			out = after(text, context)
		}
	}
	d.toks, d.prefix, d.read = nil, 0, 0
	return out
}

// after is text less its context. When the context's text is not a
// prefix (bytes of a character split between them), text is cut after
// as many bytes as the context has, at a character's start, as vLLM cuts
// it by length.
func after(text, context string) string {
	if strings.HasPrefix(text, context) {
		return text[len(context):]
	}
	i := len(context)
	for i < len(text) && !utf8.RuneStart(text[i]) {
		i++
	}
	return text[i:]
}
