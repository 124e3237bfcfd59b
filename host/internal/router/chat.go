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
// ({"type": "text", "text": ...}, joined by newlines as vLLM does), null
// only for an assistant turn. Any role passes as it is (developer too:
// the worker's template layer renders it). An assistant turn's
// tool_calls and reasoning (reasoning_content, or vLLM's newer
// reasoning) and a tool turn's tool_call_id reach the template; the
// other output-only fields of an assistant turn a client replays
// (annotations, refusal, audio, parsed) are accepted and not sent. Other
// parts (images, audio) and the deprecated function_call are refused,
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
var outputOnly = map[string]bool{"annotations": true, "refusal": true, "audio": true, "parsed": true}

// onlyOn are the message fields only one role carries.
var onlyOn = map[string]string{"tool_calls": "assistant", "reasoning_content": "assistant", "reasoning": "assistant", "tool_call_id": "tool"}

// checkMessageField checks field k of message i, role role, other than
// role and content, and reads it into m.
func checkMessageField(i int, role, k string, v json.RawMessage, m *workerv1.Message) *apiError {
	v = bytes.TrimSpace(v)
	if r, ok := onlyOn[k]; ok && r != role && !isNull(v) && !(k == "tool_calls" && bytes.Equal(v, []byte("[]"))) {
		return badRequest("messages", "messages[%d].%s: only %s messages carry %s", i, k, r, k)
	}
	var aerr *apiError
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
	case k == "tool_calls":
		m.ToolCalls, aerr = parseToolCalls(i, v)
	case k == "tool_call_id":
		if json.Unmarshal(v, &m.ToolCallId) != nil {
			return badRequest("messages", "messages[%d].tool_call_id: want a string, got %s", i, clip(v))
		}
	case k == "reasoning_content" || k == "reasoning":
		var s string
		if json.Unmarshal(v, &s) != nil {
			return badRequest("messages", "messages[%d].%s: want a string, got %s", i, k, clip(v))
		}
		if m.ReasoningContent == "" || k == "reasoning_content" {
			m.ReasoningContent = s // reasoning_content wins over reasoning
		}
	case k == "function_call":
		return badRequest("messages", "messages[%d].function_call: the deprecated function calling; send tool_calls (and tool messages with tool_call_id)", i)
	default:
		return badRequest("messages", "messages[%d]: unrecognized field %s", i, k)
	}
	return aerr
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
	if m.Role == "tool" && m.ToolCallId == "" {
		return nil, badRequest("messages", "messages[%d].tool_call_id: required for a tool message (the id of the call it answers)", i)
	}
	content, aerr := messageContent(i, m.Role, e["content"])
	m.Content = content
	return &m, aerr
}

// messageContent reads message i's content: a string or an array of
// text parts, null only for an assistant turn.
func messageContent(i int, role string, raw json.RawMessage) (string, *apiError) {
	content := bytes.TrimSpace(raw)
	bad := badRequest("messages", "messages[%d].content: want a string or an array of text parts", i)
	switch {
	case isNull(content):
		if role != "assistant" {
			return "", badRequest("messages", "messages[%d].content: required for role %q", i, role)
		}
		return "", nil
	case content[0] == '"':
		var s string
		if json.Unmarshal(content, &s) != nil {
			return "", bad
		}
		return s, nil
	case content[0] != '[':
		return "", bad
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return "", bad
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badRequest("messages", `messages[%d].content[%d]: vigil takes text parts only ({"type": "text", "text": ...}), got type %q`, i, j, p.Type)
		}
		if j > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
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
