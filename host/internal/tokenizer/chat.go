package tokenizer

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/ardanlabs/jinja"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
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
	if err := t.templateUse.checkInputs(msgs, t.templateVars); err != nil {
		return "", fmt.Errorf("tokenizer: chat template: %w", err)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	vars := make(map[string]jinja.Value, len(t.templateVars)+len(vigilFilterValues)+len(vigilFuncValues)+4)
	maps.Copy(vars, vigilFilterValues)
	maps.Copy(vars, vigilFuncValues)
	for k, v := range t.templateVars {
		vars[k] = jinja.FromGoValue(v)
	}
	vars["messages"] = jinja.NewList(list)
	vars["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)
	vars["tools"] = jinja.None()
	vars["documents"] = jinja.None()
	out, err := render(t.template, vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: chat template: %w", err)
	}
	return out, nil
}

// render renders tmpl, turning a panic of the library (its rejectattr
// with one argument slices out of range) into an error.
func render(tmpl *jinja.Template, vars map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("the template engine failed: %v", r)
		}
	}()
	return tmpl.RenderValues(vars)
}

// compileChat compiles a chat template and checks that vigil renders it
// as transformers does (chatcheck.go).
func compileChat(src string) (*jinja.Template, *templateUse, error) {
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, nil, err
	}
	use, err := checkTemplate(tmpl, src)
	if err != nil {
		return nil, nil, err
	}
	if err := use.checkText("the template's text", src); err != nil {
		return nil, nil, err
	}
	return tmpl, use, nil
}

// The library's str.strip() and str.split() treat U+001C-U+001F as
// text; its lstrip() and rstrip() strip only " \t\n\r". Python strips
// all of its whitespace.
func stripDiffers(r rune) bool { return r >= 0x1c && r <= 0x1f }

func lrstripDiffers(r rune) bool { return pyWhitespace(r) && !strings.ContainsRune(" \t\n\r", r) }

// caseDiffers: the library's str.upper() and str.lower() map one
// character to one (Python maps ß to SS, ﬁ to FI...).
func caseDiffers(r rune) bool {
	s := string(r)
	return cases.Upper(language.Und).String(s) != strings.ToUpper(s) || cases.Lower(language.Und).String(s) != strings.ToLower(s)
}

// checkText refuses text holding characters whose stripping or
// splitting by the template's string methods differs from Python's.
func (u *templateUse) checkText(what, s string) error {
	for _, c := range []struct {
		methods []string
		differs func(rune) bool
	}{{[]string{"strip", "split"}, stripDiffers}, {[]string{"lstrip", "rstrip"}, lrstripDiffers},
		{[]string{"upper", "lower"}, caseDiffers}} {
		for _, m := range c.methods {
			if !u.methods[m] {
				continue
			}
			if i := strings.IndexFunc(s, c.differs); i >= 0 {
				r := []rune(s[i:])[0]
				return fmt.Errorf("%s holds U+%04X, which the chat template's .%s() cannot treat as Python's does", what, r, m)
			}
		}
	}
	return nil
}

// checkInputs runs checkText on every string a render is given.
func (u *templateUse) checkInputs(msgs []Message, vars map[string]any) error {
	for i, m := range msgs {
		if err := u.checkText(fmt.Sprintf("messages[%d].role", i), m.Role); err != nil {
			return err
		}
		if err := u.checkText(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return err
		}
	}
	for k, v := range vars {
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		for _, e := range list {
			s, _ := e.(string)
			if err := u.checkText(k, s); err != nil {
				return err
			}
		}
	}
	return nil
}
