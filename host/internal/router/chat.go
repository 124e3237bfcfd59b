package router

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// setMessages sets a chat request's messages as the prompt: an array of
// {role, content, name}, content a string or an array of text parts
// ({"type": "text", "text": ...}, joined by newlines as vLLM does), null only for an assistant
// turn. Any role passes as it is (developer too: the worker's template
// layer renders it). The output-only fields of an assistant turn a client
// replays (annotations, refusal, audio, parsed, reasoning_content, null or
// empty tool_calls) are accepted and not sent; other parts (images, audio)
// and tool calling (tool_calls, tool_call_id, function_call) are refused,
// naming the message.
func setMessages(req *workerv1.GenerateRequest, raw json.RawMessage) *apiError {
	if isNull(raw) {
		return badRequest("messages", "messages: required")
	}
	var elems []map[string]json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return badRequest("messages", `messages: want an array of objects such as {"role": "user", "content": "Hello"}`)
	}
	if len(elems) == 0 {
		return badRequest("messages", "messages: must not be empty")
	}
	msgs := &workerv1.Messages{}
	for i, e := range elems {
		m, aerr := toMessage(i, e)
		if aerr != nil {
			return aerr
		}
		msgs.Messages = append(msgs.Messages, m)
	}
	req.Prompt = &workerv1.GenerateRequest_Messages{Messages: msgs}
	return nil
}

// outputOnly are the fields of an assistant message as OpenAI returned
// it, which a client replays with its history: not rendered, not sent.
// reasoning_content waits for issue 27's templates that render it.
var outputOnly = map[string]bool{"annotations": true, "refusal": true, "audio": true, "parsed": true, "reasoning_content": true}

// checkMessageField checks field k of message i, role role, other than
// role and content; name is read into m.
func checkMessageField(i int, role, k string, v json.RawMessage, m *workerv1.Message) *apiError {
	v = bytes.TrimSpace(v)
	switch {
	case k == "name":
		if json.Unmarshal(v, &m.Name) != nil && !isNull(v) {
			return badRequest("messages", "messages[%d].name: want a string, got %s", i, clip(v))
		}
	case isNull(v):
	case outputOnly[k]:
		if role != "assistant" {
			return badRequest("messages", "messages[%d].%s: only an assistant message carries %s", i, k, k)
		}
	case k == "tool_calls" && bytes.Equal(v, []byte("[]")):
	case k == "tool_calls" || k == "tool_call_id" || k == "function_call":
		return badRequest("messages", "messages[%d].%s: vigil does not take tool calling yet; omit it", i, k)
	default:
		return badRequest("messages", "messages[%d]: unrecognized field %s", i, k)
	}
	return nil
}

func toMessage(i int, e map[string]json.RawMessage) (*workerv1.Message, *apiError) {
	var m workerv1.Message
	if json.Unmarshal(e["role"], &m.Role) != nil || m.Role == "" {
		return nil, badRequest("messages", "messages[%d].role: want a non-empty string such as \"user\"", i)
	}
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if k == "role" || k == "content" {
			continue
		}
		if aerr := checkMessageField(i, m.Role, k, e[k], &m); aerr != nil {
			return nil, aerr
		}
	}
	content := bytes.TrimSpace(e["content"])
	switch {
	case isNull(content):
		if m.Role != "assistant" {
			return nil, badRequest("messages", "messages[%d].content: required for role %q", i, m.Role)
		}
	case content[0] == '"':
		if json.Unmarshal(content, &m.Content) != nil {
			return nil, badRequest("messages", "messages[%d].content: want a string or an array of text parts", i)
		}
	case content[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(content, &parts) != nil {
			return nil, badRequest("messages", "messages[%d].content: want a string or an array of text parts", i)
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return nil, badRequest("messages", `messages[%d].content[%d]: vigil takes text parts only ({"type": "text", "text": ...}), got type %q`, i, j, p.Type)
			}
			if j > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(*p.Text)
		}
		m.Content = b.String()
	default:
		return nil, badRequest("messages", "messages[%d].content: want a string or an array of text parts", i)
	}
	return &m, nil
}

// templateOwned are the chat template's variables the worker sets itself
// (host/internal/tokenizer: RenderChat and the tokenizer's special
// tokens), which chat_template_kwargs may not override.
var templateOwned = map[string]bool{
	"messages": true, "tools": true, "documents": true, "add_generation_prompt": true,
	"raise_exception": true, "strftime_now": true,
	"bos_token": true, "eos_token": true, "unk_token": true, "sep_token": true, "pad_token": true,
	"cls_token": true, "mask_token": true, "additional_special_tokens": true,
}

// setTemplateKwargs maps chat_template_kwargs, a JSON object of extra
// template variables (Qwen3's {"enable_thinking": false}), onto msgs as
// JSON text; {} sets nothing, so it needs no capability.
func setTemplateKwargs(msgs *workerv1.Messages, raw json.RawMessage) *apiError {
	if isNull(raw) {
		return nil
	}
	m, aerr := object("chat_template_kwargs", raw)
	if aerr != nil || len(m) == 0 {
		return aerr
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if templateOwned[k] {
			return badRequest("chat_template_kwargs."+k, "chat_template_kwargs.%s: the worker sets %s itself; omit it", k, k)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return badRequest("chat_template_kwargs", "chat_template_kwargs: %v", err)
	}
	msgs.ChatTemplateKwargs = buf.String()
	return nil
}
