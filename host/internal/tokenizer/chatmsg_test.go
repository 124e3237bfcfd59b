package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The renderings below are python3's jinja2 3.1.6 in transformers'
// environment (scripts/tokenizer-fixtures/render.py, which takes a
// conversation's "kwargs") of the real templates in testdata/models, for
// the messages as vigil hands them to the template.

// TestDeveloperRole: Qwen3's template drops a developer message and
// Llama 3's renders a "developer" header it was never trained on; neither
// mentions the role, so vigil renders it as system, the leading system
// and developer contents joined with a blank line.
func TestDeveloperRole(t *testing.T) {
	for _, c := range []struct {
		model string
		msgs  []Message
		want  string
	}{
		{"qwen3", []Message{{Role: "developer", Content: "Be brief."}, {Role: "user", Content: "hi"}},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3", []Message{{Role: "system", Content: "A"}, {Role: "developer", Content: "B"}, {Role: "user", Content: "hi"}},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nA\n\nB<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	} {
		tok, err := Load(filepath.Join("testdata/models", c.model), "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tok.RenderChat(c.msgs, true); err != nil || got != c.want {
			t.Errorf("%s: RenderChat(%v) = %q, %v; want %q", c.model, c.msgs, got, err, c.want)
		}
	}
}

// A template that knows the developer role gets it unchanged.
func TestDeveloperRoleKnown(t *testing.T) {
	tok := templated(t, "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{# developer #}")
	got, err := tok.RenderChat([]Message{{Role: "system", Content: "A"}, {Role: "developer", Content: "B"}, {Role: "user", Content: "hi"}}, false)
	if want := "system=A;developer=B;user=hi;"; err != nil || got != want {
		t.Errorf("RenderChat = %q, %v; want %q", got, err, want)
	}
	tok = templated(t, "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}")
	got, err = tok.RenderChat([]Message{{Role: "user", Content: "hi"}, {Role: "developer", Content: "B"}, {Role: "system", Content: "C"}}, false)
	if want := "user=hi;system=B;system=C;"; err != nil || got != want {
		t.Errorf("a developer message after the first turn: RenderChat = %q, %v; want %q", got, err, want)
	}
}

// Message.name reaches the template as the message's name key, after
// role and content (Python: {'role': 'user', 'content': 'hi', 'name': 'bob'}).
func TestMessageName(t *testing.T) {
	tok := templated(t, "{{ messages[0] }}|{{ messages[1] }}")
	got, err := tok.RenderChat([]Message{{Role: "user", Content: "hi", Name: "bob"}, {Role: "user", Content: "yo"}}, false)
	if want := "{'role': 'user', 'content': 'hi', 'name': 'bob'}|{'role': 'user', 'content': 'yo'}"; err != nil || got != want {
		t.Errorf("RenderChat = %q, %v; want %q", got, err, want)
	}
}

// Qwen3's enable_thinking: false, as a chat_template_kwargs, opens the
// answer with an empty think block.
func TestKwargsEnableThinking(t *testing.T) {
	tok, err := Load("testdata/models/qwen3", "")
	if err != nil {
		t.Fatal(err)
	}
	kw, err := ParseKwargs(`{"enable_thinking": false}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	got, err := tok.RenderChatWith(msgs, ChatOptions{AddGenerationPrompt: true, Kwargs: kw})
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; err != nil || got != want {
		t.Errorf("enable_thinking false: %q, %v; want %q", got, err, want)
	}
	got, err = tok.RenderChatWith(msgs, ChatOptions{AddGenerationPrompt: true})
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
		t.Errorf("no kwargs: %q, %v; want %q", got, err, want)
	}
}

// Kwargs keep JSON's types and order as json.loads gives them; keys the
// renderer sets itself are refused, naming the key.
func TestKwargs(t *testing.T) {
	tok := templated(t, "{{ a }} {{ b }} {{ c }} {{ d }} {{ e is none }}")
	kw, err := ParseKwargs(`{"a": 1, "b": 1.5, "c": {"z": [true, "x"], "y": 2}, "d": "s", "e": null}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tok.RenderChatWith(nil, ChatOptions{Kwargs: kw})
	if want := "1 1.5 {'z': [True, 'x'], 'y': 2} s True"; err != nil || got != want {
		t.Errorf("RenderChatWith = %q, %v; want %q", got, err, want)
	}
	for _, key := range []string{"messages", "tools", "add_generation_prompt", "bos_token"} {
		_, err := tok.RenderChatWith(nil, ChatOptions{Kwargs: map[string]any{key: 1}})
		var ke *KwargError
		if !errors.As(err, &ke) || ke.Key != key || ke.Error()[:len("chat_template_kwargs."+key)] != "chat_template_kwargs."+key {
			t.Errorf("kwarg %s: err = %v, want a KwargError naming it", key, err)
		}
	}
	for _, bad := range []string{`[1]`, `1`, `{"a": 1} {}`, `{"a": }`} {
		if _, err := ParseKwargs(bad); err == nil {
			t.Errorf("ParseKwargs(%s) = nil error, want one", bad)
		}
	}
	if kw, err := ParseKwargs(""); kw != nil || err != nil {
		t.Errorf(`ParseKwargs("") = %v, %v; want nil, nil`, kw, err)
	}
}

// templated loads a tiny tokenizer with src as its chat template and a
// bos_token.
func templated(t *testing.T, src string) *Tokenizer {
	t.Helper()
	dir := modelDir(t, map[string]string{
		TokenizerFile:       string(tinyTokenizer(t, "BPE")),
		TokenizerConfigFile: `{"bos_token": "<s>"}`,
	})
	file := filepath.Join(t.TempDir(), "chat.jinja")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir, file)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
