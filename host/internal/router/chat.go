package router

import (
	"bytes"
	"encoding/json"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// setMessages sets a chat request's messages as the prompt: an array of
// {role, content}, content a string or an array of text parts
// ({"type": "text", "text": ...}, joined by newlines as vLLM does), null only for an assistant
// turn. Other parts (images, audio) and fields of a tool-calling turn
// (tool_calls, tool_call_id, name) are refused, naming the message.
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

func toMessage(i int, e map[string]json.RawMessage) (*workerv1.Message, *apiError) {
	var m workerv1.Message
	if json.Unmarshal(e["role"], &m.Role) != nil || m.Role == "" {
		return nil, badRequest("messages", "messages[%d].role: want a non-empty string such as \"user\"", i)
	}
	for k, v := range e {
		switch k {
		case "role", "content":
		case "tool_calls", "function_call", "tool_call_id", "name", "refusal", "audio":
			if !isNull(v) && !(k == "tool_calls" && bytes.Equal(bytes.TrimSpace(v), []byte("[]"))) {
				return nil, badRequest("messages", "messages[%d].%s: vigil cannot honour %s (no tool calling); omit it", i, k, k)
			}
		default:
			return nil, badRequest("messages", "messages[%d]: unrecognized field %s", i, k)
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
