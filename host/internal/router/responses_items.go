package router

import (
	"bytes"
	"compress/flate"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// setInput maps instructions and input (a string, or a list of message
// and item_reference items) onto req's messages.
func (c *responsesRequest) setInput(req *workerv1.GenerateRequest, maxText int64) *apiError {
	msgs := &workerv1.Messages{}
	if c.Instructions != nil && *c.Instructions != "" {
		msgs.Messages = append(msgs.Messages, &workerv1.Message{Role: "system", Content: *c.Instructions})
	}
	raw := bytes.TrimSpace(c.Input)
	var items []map[string]json.RawMessage
	switch {
	case isNull(raw):
		return badRequest("input", "input: required")
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return badRequest("input", "input: want a non-empty string or a list of items")
		}
		msgs.Messages = append(msgs.Messages, &workerv1.Message{Role: "user", Content: s})
	case raw[0] != '[' || json.Unmarshal(raw, &items) != nil:
		return badRequest("input", `input: want a string or a list of items such as {"role": "user", "content": "Hello"}`)
	case len(items) == 0:
		return badRequest("input", "input: must not be empty")
	}
	budget := maxText // the decoded text of all item_references, together
	for i, it := range items {
		m, aerr := inputItem(i, it, &budget)
		if aerr != nil {
			return aerr
		}
		msgs.Messages = append(msgs.Messages, m)
	}
	req.Prompt = &workerv1.GenerateRequest_Messages{Messages: msgs}
	return nil
}

// itemRoles are the roles a message item may have.
var itemRoles = map[string]bool{"user": true, "system": true, "developer": true, "assistant": true}

// inputItem reads input item i: a message ({role, content}, type
// "message" or none; a replayed output message's id, status and phase are
// accepted and not sent) or an item_reference to an output message.
func inputItem(i int, it map[string]json.RawMessage, budget *int64) (*workerv1.Message, *apiError) {
	var typ string
	if t, ok := it["type"]; ok && json.Unmarshal(t, &typ) != nil {
		return nil, badRequest("input", "input[%d].type: want a string, got %s", i, clip(t))
	}
	switch typ {
	case "item_reference":
		return itemReference(i, it, budget)
	case "", "message":
	default:
		return nil, badRequest("input", "input[%d].type: vigil takes message and item_reference items, got %q", i, typ)
	}
	m := &workerv1.Message{}
	if json.Unmarshal(it["role"], &m.Role) != nil || !itemRoles[m.Role] {
		return nil, badRequest("input", `input[%d].role: want "user", "system", "developer" or "assistant", got %s`, i, clip(it["role"]))
	}
	for _, k := range slices.Sorted(maps.Keys(it)) {
		switch k {
		case "type", "role", "content", "id", "status", "phase":
		default:
			return nil, badRequest("input", "input[%d]: unrecognized field %s of a message item", i, k)
		}
	}
	content, aerr := itemContent(i, m.Role, bytes.TrimSpace(it["content"]))
	m.Content = content
	return m, aerr
}

// itemContent reads a message item's content: a string, or a list of
// input_text and output_text parts (joined by newlines, as chat's text
// parts); a refusal in an assistant's history is not sent, as chat's.
func itemContent(i int, role string, raw json.RawMessage) (string, *apiError) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", badRequest("input", "input[%d].content: want a string or a list of parts", i)
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if isNull(raw) || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return "", badRequest("input", "input[%d].content: want a string or a list of parts", i)
	}
	var texts []string
	for j, p := range parts {
		switch {
		case p.Type == "refusal" && role == "assistant":
		case (p.Type == "input_text" || p.Type == "output_text") && p.Text != nil:
			texts = append(texts, *p.Text)
		default:
			return "", badRequest("input", `input[%d].content[%d]: vigil takes text parts only ({"type": "input_text", "text": ...}, output_text, and refusal in an assistant's history), got type %q`, i, j, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// The ids of output message items. vigil keeps no state, so a message's
// id carries its text: "msg_" and the base64url (no padding) of a version
// byte, 4 random bytes (ids stay unique), the text's CRC-32 (a cut or
// altered id is refused, not read as other text), and the text, raw
// (idRaw) or deflated (idFlate), whichever is shorter. The version byte makes every
// such id start "msg_A"; a message whose id would exceed maxItemID gets
// "msg_" and random hex, which no item_reference resolves, and so does a
// streamed one (its id is sent before its text exists).
const (
	idRaw     = 1
	idFlate   = 2
	idNonce   = 4
	idHead    = idNonce + 4
	maxItemID = 32 << 10
)

// randomItemID is the id of a message whose text it cannot carry: hex,
// which never starts with "A".
func randomItemID() string {
	var b [12]byte
	rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// itemID is the id of an output message that carries its text.
func itemID(text string) string {
	head := make([]byte, idHead)
	rand.Read(head[:idNonce])
	binary.BigEndian.PutUint32(head[idNonce:], crc32.ChecksumIEEE([]byte(text)))
	payload := append([]byte{idRaw}, head...)
	payload = append(payload, text...)
	var z bytes.Buffer
	z.WriteByte(idFlate)
	z.Write(head)
	fw, _ := flate.NewWriter(&z, flate.BestCompression)
	fw.Write([]byte(text))
	fw.Close()
	if z.Len() < len(payload) {
		payload = z.Bytes()
	}
	id := "msg_" + base64.RawURLEncoding.EncodeToString(payload)
	if len(id) > maxItemID {
		return randomItemID()
	}
	return id
}

// errItemsTooLarge: the ids of a request's item_references decode to
// more text than the request may hold; checked while inflating, so that
// forged ids cannot make the router inflate more.
var errItemsTooLarge = errors.New("the messages of the request's item_references decode to more text than a request may hold (--max-body-bytes)")

// decodeItemID is the text an output message's id carries, at most
// budget bytes, which it takes from budget.
func decodeItemID(id string, budget *int64) (string, error) {
	enc, ok := strings.CutPrefix(id, "msg_A")
	if !ok || len(id) > maxItemID {
		return "", fmt.Errorf("not the id of a message vigil answered whole")
	}
	b, err := base64.RawURLEncoding.DecodeString(id[len("msg_"):])
	malformed := fmt.Errorf("a malformed message id")
	if err != nil || len(enc) == 0 || len(b) < 1+idHead {
		return "", malformed
	}
	text := b[1+idHead:]
	switch b[0] {
	case idRaw:
	case idFlate:
		text, err = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(text)), *budget+1))
		switch {
		case int64(len(text)) > *budget:
			return "", errItemsTooLarge
		case err != nil:
			return "", malformed
		}
	default:
		return "", fmt.Errorf("a message id of an unknown version")
	}
	if int64(len(text)) > *budget {
		return "", errItemsTooLarge
	}
	if crc32.ChecksumIEEE(text) != binary.BigEndian.Uint32(b[1+idNonce:]) {
		return "", malformed
	}
	*budget -= int64(len(text))
	return string(text), nil
}

// itemReference resolves an item_reference to an output message of
// vigil's, whose id carries its text (itemID).
func itemReference(i int, it map[string]json.RawMessage, budget *int64) (*workerv1.Message, *apiError) {
	for k := range it {
		if k != "type" && k != "id" {
			return nil, badRequest("input", "input[%d].%s: not a field of an item_reference (type, id)", i, k)
		}
	}
	var id string
	if json.Unmarshal(it["id"], &id) != nil || id == "" {
		return nil, badRequest(fmt.Sprintf("input[%d].id", i), "input[%d].id: an item_reference wants the id of an output message", i)
	}
	text, err := decodeItemID(id, budget)
	if errors.Is(err, errItemsTooLarge) {
		return nil, badRequest(fmt.Sprintf("input[%d].id", i), "input[%d].id: %v", i, err)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("input[%d].id", i),
			"input[%d].id: item_reference %q: %v. vigil keeps no state: an item_reference resolves only to a message vigil answered whole "+
				"(not streamed), whose id carries its text. Send the assistant message itself instead (with the AI SDK: providerOptions.openai.store = false)", i, clipStr(id), err)
	}
	return &workerv1.Message{Role: "assistant", Content: text}, nil
}
