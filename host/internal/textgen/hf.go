package textgen

import (
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/host/internal/tokenizer"
)

// HF is t as the worker's Tokenizer: text prompts encoded with special
// tokens, chat prompts rendered with the generation prompt and encoded
// without, output decoded with special tokens skipped, as vLLM does.
func HF(t *tokenizer.Tokenizer) Tokenizer { return hf{t} }

type hf struct{ t *tokenizer.Tokenizer }

func (h hf) Encode(text string) ([]uint32, error) { return h.t.Encode(text, true) }

func (h hf) ChatTokens(chat Chat) ([]uint32, string, error) {
	kwargs, err := tokenizer.ParseKwargs(chat.Kwargs)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", kwargsField, err)
	}
	m := make([]tokenizer.Message, len(chat.Messages))
	for i, c := range chat.Messages {
		m[i] = tokenizer.Message{Role: c.Role, Content: c.Content, Name: c.Name, ToolCallID: c.ToolCallID, ReasoningContent: c.ReasoningContent}
		for _, tc := range c.ToolCalls {
			m[i].ToolCalls = append(m[i].ToolCalls, tokenizer.ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Name, Arguments: tc.Arguments})
		}
	}
	opts := tokenizer.ChatOptions{AddGenerationPrompt: !chat.NoGenerationPrompt, Kwargs: kwargs, Tools: chat.Tools}
	text, err := h.t.RenderChatWith(m, opts)
	var ke *tokenizer.KwargError
	var ie *tokenizer.InputError
	switch {
	case errors.As(err, &ke):
		return nil, "", ke
	case errors.As(err, &ie):
		return nil, "", ie // names its field: tools[0].function.name...
	case err != nil:
		return nil, "", err
	}
	ids, err := h.t.Encode(text, false)
	return ids, text, err
}

func (h hf) Decode(ids []uint32) (string, error) { return h.t.Decode(ids, false) }

func (h hf) HasChatTemplate() bool { return h.t.HasChatTemplate() }

func (h hf) NewDecoder(prompt []uint32, keep []string) Decoder {
	d := h.t.NewDecoder(true, prompt)
	for _, k := range keep {
		if id, ok := h.t.SpecialTokenID(k); ok {
			d.Keep(id)
		}
	}
	return d
}

func (h hf) TemplateSource() string { return h.t.TemplateSource() }

func (h hf) EncodeRaw(text string) ([]uint32, error) { return h.t.Encode(text, false) }

func (h hf) Tokens(ids []uint32) ([]string, error) {
	out := make([]string, len(ids))
	for i, id := range ids {
		tok, ok := h.t.Token(id)
		if !ok {
			return nil, fmt.Errorf("token id %d is not in the vocabulary", id)
		}
		out[i] = tok
	}
	return out, nil
}

func (h hf) TokenBytes(id uint32) ([]byte, string, bool) { return h.t.TokenBytes(id) }
