package textgen

import "github.com/vigilhq/vigil/host/internal/tokenizer"

// HF is t as the worker's Tokenizer: text prompts encoded with special
// tokens, chat prompts rendered with the generation prompt and encoded
// without, output decoded with special tokens skipped, as vLLM does.
func HF(t *tokenizer.Tokenizer) Tokenizer { return hf{t} }

type hf struct{ t *tokenizer.Tokenizer }

func (h hf) Encode(text string) ([]uint32, error) { return h.t.Encode(text, true) }

func (h hf) ChatTokens(msgs []Message) ([]uint32, error) {
	m := make([]tokenizer.Message, len(msgs))
	for i, c := range msgs {
		m[i] = tokenizer.Message{Role: c.Role, Content: c.Content}
	}
	text, err := h.t.RenderChat(m, true)
	if err != nil {
		return nil, err
	}
	return h.t.Encode(text, false)
}

func (h hf) HasChatTemplate() bool { return h.t.HasChatTemplate() }

func (h hf) NewDecoder(prompt []uint32) Decoder { return h.t.NewDecoder(true, prompt) }
