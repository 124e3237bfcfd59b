package tokenizer

import (
	"errors"
	"fmt"
	"maps"

	"github.com/vigilhq/vigil/host/internal/jinja"
)

// ErrNoChatTemplate is returned by RenderChat when neither
// tokenizer_config.json's chat_template nor a chat template file was given.
var ErrNoChatTemplate = errors.New("tokenizer: the model has no chat template (tokenizer_config.json has no chat_template; give a chat template file)")

// HasChatTemplate reports whether RenderChat has a template to render.
func (t *Tokenizer) HasChatTemplate() bool { return t.template != nil }

// RenderChat renders msgs with the model's chat template as transformers'
// apply_chat_template(tokenize=False) does: the template sees messages
// (each with role and content, in that order), add_generation_prompt,
// tools and documents (none), and the special tokens of
// tokenizer_config.json (bos_token, eos_token, unk_token, pad_token...,
// additional_special_tokens), with trim_blocks and lstrip_blocks on and
// raise_exception and strftime_now defined. A template's
// raise_exception("...") comes back as an error holding its message.
func (t *Tokenizer) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.template == nil {
		return "", ErrNoChatTemplate
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		_ = d.Set("role", m.Role)
		_ = d.Set("content", m.Content)
		list[i] = d
	}
	vars := make(map[string]any, len(t.templateVars)+4)
	maps.Copy(vars, t.templateVars)
	vars["messages"] = list
	vars["add_generation_prompt"] = addGenerationPrompt
	vars["tools"] = nil
	vars["documents"] = nil
	out, err := t.template.Render(vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: chat template: %w", err)
	}
	return out, nil
}
