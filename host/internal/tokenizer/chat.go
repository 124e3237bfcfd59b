package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/vigilhq/vigil/host/internal/jinja"
)

// ErrNoChatTemplate is returned by RenderChat when neither
// tokenizer_config.json's chat_template nor a chat template file was given.
var ErrNoChatTemplate = errors.New("tokenizer: the model has no chat template (tokenizer_config.json has no chat_template; give a chat template file)")

// The roles RenderChat treats specially.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer" // OpenAI's newer name for system
)

// HasChatTemplate reports whether RenderChat has a template to render.
func (t *Tokenizer) HasChatTemplate() bool { return t.template != nil }

// ChatOptions are RenderChatWith's inputs beside the messages.
type ChatOptions struct {
	// AddGenerationPrompt appends the assistant turn's opening.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs, as
	// ParseKwargs reads them); nil: none. A key the renderer sets itself
	// is a *KwargError.
	Kwargs map[string]any
	// Tools is OpenAI's chat tools array as JSON text; "" for none (the
	// template's tools is None). A bad one is an *InputError.
	Tools string
}

// KwargError refuses a chat_template_kwargs key that would override a
// variable the renderer sets itself (messages, tools, bos_token...).
type KwargError struct{ Key string }

func (e *KwargError) Error() string {
	return fmt.Sprintf("chat_template_kwargs.%s: the worker sets this template variable itself; it cannot be overridden", e.Key)
}

// RenderChat is RenderChatWith without kwargs.
func (t *Tokenizer) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderChatWith(msgs, ChatOptions{AddGenerationPrompt: addGenerationPrompt})
}

// RenderChatWith renders msgs with the model's chat template as
// transformers' apply_chat_template(tokenize=False) does, given what
// vLLM's server gives it: the template sees messages (each with role and
// content, in that order, then name, tool_calls, tool_call_id and
// reasoning_content when set; see messageDict), add_generation_prompt,
// tools (opts.Tools as toolsValue gives them, None for none), documents
// (None), the special
// tokens of tokenizer_config.json (bos_token, eos_token, unk_token,
// pad_token..., additional_special_tokens) and opts.Kwargs, with
// trim_blocks and lstrip_blocks on and raise_exception and strftime_now
// defined. A template whose source does not mention "developer" gets
// developer messages as system ones, the leading system and developer
// contents joined with a blank line into one (templates such as Qwen3's
// drop an unknown role; Llama 3's renders it as a header it was never
// trained on). A template's raise_exception("...") comes back as an error
// holding its message.
func (t *Tokenizer) RenderChatWith(msgs []Message, opts ChatOptions) (string, error) {
	if t.template == nil {
		return "", ErrNoChatTemplate
	}
	if !t.developer {
		msgs = developerAsSystem(msgs)
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		d, err := messageDict(i, m)
		if err != nil {
			return "", err
		}
		list[i] = d
	}
	tools, err := toolsValue(opts.Tools)
	if err != nil {
		return "", err
	}
	vars := make(map[string]any, len(t.templateVars)+len(opts.Kwargs)+4)
	for k, v := range opts.Kwargs {
		if t.reserved(k) {
			return "", &KwargError{Key: k}
		}
		vars[k] = v
	}
	maps.Copy(vars, t.templateVars)
	vars["messages"] = list
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	vars["tools"] = tools
	vars["documents"] = nil
	out, err := t.template.Render(vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: chat template: %w", err)
	}
	return out, nil
}

// reserved reports whether the renderer sets the variable k itself.
func (t *Tokenizer) reserved(k string) bool {
	switch k {
	case "messages", "add_generation_prompt", "tools", "documents", "raise_exception", "strftime_now":
		return true
	}
	_, ok := t.templateVars[k]
	return ok
}

// developerAsSystem renders developer messages as system ones, the
// leading run of system and developer messages joined into one when it
// holds a developer message.
func developerAsSystem(msgs []Message) []Message {
	lead, dev := 0, false
	for lead < len(msgs) && (msgs[lead].Role == RoleSystem || msgs[lead].Role == RoleDeveloper) {
		dev = dev || msgs[lead].Role == RoleDeveloper
		lead++
	}
	rest := msgs[lead:]
	if !dev && !hasRole(rest, RoleDeveloper) {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	if dev {
		parts := make([]string, lead)
		for i, m := range msgs[:lead] {
			parts[i] = m.Content
		}
		out = append(out, Message{Role: RoleSystem, Content: strings.Join(parts, "\n\n")})
	} else {
		out = append(out, msgs[:lead]...)
	}
	for _, m := range rest {
		if m.Role == RoleDeveloper {
			m.Role = RoleSystem
		}
		out = append(out, m)
	}
	return out
}

func hasRole(msgs []Message, role string) bool {
	for _, m := range msgs {
		if m.Role == role {
			return true
		}
	}
	return false
}

// ParseKwargs reads chat_template_kwargs, a JSON object, into template
// variables as Python's json.loads gives them to jinja2: objects keep
// their key order, integers stay integers. "" is nil.
func ParseKwargs(text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("want a JSON object")
	}
	out := map[string]any{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if out[k.(string)], err = jsonValue(dec); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("want one JSON object, found more after it")
	}
	return out, nil
}

// jsonValue reads the next JSON value of dec as a template value.
func jsonValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			list := []any{}
			for dec.More() {
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		return jsonObject(dec)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	}
	return tok, nil // string, bool or nil
}

// jsonObject reads an object's members after its '{' into a template
// dict, in their order (jsonMembers).
func jsonObject(dec *json.Decoder) (any, error) {
	members, err := jsonMembers(dec)
	if err != nil {
		return nil, err
	}
	d := jinja.NewDict()
	for _, m := range members {
		_ = d.Set(m.key, m.val)
	}
	return d, nil
}
