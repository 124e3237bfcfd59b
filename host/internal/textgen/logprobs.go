package textgen

import "strings"

// TokenBytes is what a Tokenizer needs for logprobs (HF has it): one
// token's own bytes and text (tokenizer.Tokenizer.TokenBytes).
type TokenBytes interface {
	TokenBytes(id uint32) (raw []byte, text string, ok bool)
}

// CanLogprob reports whether LogprobToken gives token text: the tokenizer
// is a TokenBytes.
func (e *Engine) CanLogprob() bool {
	_, ok := e.tok.(TokenBytes)
	return ok
}

// maxCharContext is how many tokens before one can hold the rest of its
// character: UTF-8 has at most 4 bytes a character.
const maxCharContext = 4

// LogprobToken is id's text and bytes as vLLM's OpenAI server shows a
// logprob's token: the token decoded alone (a SentencePiece token with
// its leading space), and for a token that ends inside a character, what
// it adds to the text after before, the chosen tokens before its
// position (vLLM's _verify_tokens): the whole character on the token
// that completes it, "" on those before. raw is the token's own bytes,
// part of a character for such a token. CanLogprob must hold.
func (e *Engine) LogprobToken(before []uint32, id uint32) (text string, raw []byte) {
	tb := e.tok.(TokenBytes)
	raw, text, ok := tb.TokenBytes(id)
	if !ok || !strings.HasSuffix(text, "\uFFFD") {
		return text, raw
	}
	return e.charCompleted(before, id), raw
}

// charCompleted is the text id adds to the text of the (up to 4) tokens
// before it when that completes a character, "" when it does not: the
// decoding of the context and id, less that of the context's tokens
// before the first that is part of the same character.
func (e *Engine) charCompleted(before []uint32, id uint32) string {
	tb := e.tok.(TokenBytes)
	for k := 1; k <= min(len(before), maxCharContext); k++ {
		ctx := before[len(before)-k:]
		full, err := e.tok.Decode(append(append([]uint32(nil), ctx...), id))
		if err != nil || strings.HasSuffix(full, "\uFFFD") {
			continue
		}
		clean := len(ctx)
		for clean > 0 {
			if _, t, _ := tb.TokenBytes(ctx[clean-1]); !strings.HasSuffix(t, "\uFFFD") {
				break
			}
			clean--
		}
		prefix, err := e.tok.Decode(ctx[:clean])
		if err != nil {
			return ""
		}
		if p, ok := strings.CutPrefix(full, prefix); ok {
			return p
		}
		n := 0
		for n < len(full) && n < len(prefix) && full[n] == prefix[n] {
			n++
		}
		return full[n:]
	}
	return ""
}
