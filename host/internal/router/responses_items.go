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
	t := &turns{msgs: msgs.Messages}
	for i, it := range items {
		if aerr := inputItem(t, i, it, &budget); aerr != nil {
			return aerr
		}
	}
	msgs.Messages = t.msgs
	req.Prompt = &workerv1.GenerateRequest_Messages{Messages: msgs}
	return nil
}

// itemRoles are the roles a message item may have.
var itemRoles = map[string]bool{"user": true, "system": true, "developer": true, "assistant": true}

// inputItem adds input item i to t: a message ({role, content}, type
// "message" or none; a replayed output message's id, status and phase are
// accepted and not sent), a function_call, a function_call_output, a
// reasoning item, or an item_reference to an output item of vigil's.
func inputItem(t *turns, i int, it map[string]json.RawMessage, budget *int64) *apiError {
	var typ string
	if v, ok := it["type"]; ok && json.Unmarshal(v, &typ) != nil {
		return badRequest("input", "input[%d].type: want a string, got %s", i, clip(v))
	}
	switch typ {
	case "item_reference":
		return itemReference(t, i, it, budget)
	case "function_call":
		tc, aerr := functionCall(i, it)
		if aerr == nil {
			t.call(tc)
		}
		return aerr
	case "function_call_output":
		m, aerr := functionCallOutput(i, it)
		if aerr == nil {
			t.message(m)
		}
		return aerr
	case "reasoning":
		text, aerr := reasoningItem(i, it)
		t.think(text)
		return aerr
	case "", "message":
	default:
		return badRequest("input", "input[%d].type: vigil takes message, function_call, function_call_output, reasoning and item_reference items, got %q", i, typ)
	}
	m := &workerv1.Message{}
	if json.Unmarshal(it["role"], &m.Role) != nil || !itemRoles[m.Role] {
		return badRequest("input", `input[%d].role: want "user", "system", "developer" or "assistant", got %s`, i, clip(it["role"]))
	}
	for _, k := range slices.Sorted(maps.Keys(it)) {
		switch k {
		case "type", "role", "content", "id", "status", "phase":
		default:
			return badRequest("input", "input[%d]: unrecognized field %s of a message item", i, k)
		}
	}
	content, aerr := itemContent(i, m.Role, bytes.TrimSpace(it["content"]))
	m.Content = content
	t.message(m)
	return aerr
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

// The ids of output items. vigil keeps no state, so an item's id carries
// the item: its prefix ("msg_" a message, "fc_" a function call, "rs_"
// reasoning) and the base64url (no padding) of a version byte, 4 random
// bytes (ids stay unique), the payload's CRC-32 (a cut or altered id is
// refused, not read as another item), and the payload, raw (idRaw) or
// deflated (idFlate), whichever is shorter. A message's payload is its
// text, reasoning's its text, a call's the JSON array [call_id, name,
// arguments]. The version byte makes every such id start with its prefix
// and "A"; an item whose id would exceed maxItemID gets its prefix and
// random hex, which no item_reference resolves, and so does a streamed one
// (its id is sent before the item exists).
const (
	idRaw     = 1
	idFlate   = 2
	idNonce   = 4
	idHead    = idNonce + 4
	maxItemID = 32 << 10
)

// The prefixes of output items' ids.
const (
	prefixMessage   = "msg_"
	prefixCall      = "fc_"
	prefixReasoning = "rs_"
)

// randomItemID is the id of an item whose payload it cannot carry: hex,
// which never starts with "A".
func randomItemID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// itemID is the id of an output message that carries its text.
func itemID(text string) string { return payloadID(prefixMessage, text) }

// callItemID is the id of an output function call that carries it.
func callItemID(callID, name, arguments string) string {
	b, _ := json.Marshal([]string{callID, name, arguments})
	return payloadID(prefixCall, string(b))
}

// payloadID is the id of prefix that carries payload.
func payloadID(prefix, payload string) string {
	head := make([]byte, idHead)
	rand.Read(head[:idNonce])
	binary.BigEndian.PutUint32(head[idNonce:], crc32.ChecksumIEEE([]byte(payload)))
	raw := append([]byte{idRaw}, head...)
	raw = append(raw, payload...)
	var z bytes.Buffer
	z.WriteByte(idFlate)
	z.Write(head)
	fw, _ := flate.NewWriter(&z, flate.BestCompression)
	fw.Write([]byte(payload))
	fw.Close()
	if z.Len() < len(raw) {
		raw = z.Bytes()
	}
	id := prefix + base64.RawURLEncoding.EncodeToString(raw)
	if len(id) > maxItemID {
		return randomItemID(prefix)
	}
	return id
}

// errItemsTooLarge: the ids of a request's item_references decode to
// more text than the request may hold; checked while inflating, so that
// forged ids cannot make the router inflate more.
var errItemsTooLarge = errors.New("the items of the request's item_references decode to more text than a request may hold (--max-body-bytes)")

// errStreamedItem: the id is one vigil gave an item it streamed, which
// carries nothing.
var errStreamedItem = errors.New("the id of an item vigil streamed, which carries nothing")

// idPrefix is the prefix of id among vigil's, "" for none.
func idPrefix(id string) string {
	for _, p := range []string{prefixMessage, prefixCall, prefixReasoning} {
		if strings.HasPrefix(id, p) {
			return p
		}
	}
	return ""
}

// decodeItemID is the payload an output item's id carries, at most
// budget bytes, which it takes from budget.
func decodeItemID(id string, budget *int64) (string, error) {
	prefix := idPrefix(id)
	enc, ok := strings.CutPrefix(id, prefix+"A")
	switch {
	case prefix == "":
		return "", fmt.Errorf("not the id of an item vigil answered")
	case !ok && len(id) == len(prefix)+24 && strings.Trim(id[len(prefix):], "0123456789abcdef") == "":
		return "", errStreamedItem
	case !ok || len(id) > maxItemID:
		return "", fmt.Errorf("not the id of an item vigil answered whole")
	}
	b, err := base64.RawURLEncoding.DecodeString(id[len(prefix):])
	malformed := fmt.Errorf("a malformed item id")
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
		return "", fmt.Errorf("an item id of an unknown version")
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

// itemReference resolves an item_reference to an output item of vigil's,
// whose id carries it (payloadID), and adds it to t. A reference to
// reasoning vigil streamed, whose id carries nothing, is left out: the
// turn goes without its reasoning, as the AI SDK sends it with store false
// (it drops reasoning it cannot replay), where a message's or a call's
// would change what the model sees.
func itemReference(t *turns, i int, it map[string]json.RawMessage, budget *int64) *apiError {
	for k := range it {
		if k != "type" && k != "id" {
			return badRequest("input", "input[%d].%s: not a field of an item_reference (type, id)", i, k)
		}
	}
	param := fmt.Sprintf("input[%d].id", i)
	var id string
	if json.Unmarshal(it["id"], &id) != nil || id == "" {
		return badRequest(param, "input[%d].id: an item_reference wants the id of an output item", i)
	}
	payload, err := decodeItemID(id, budget)
	switch {
	case errors.Is(err, errStreamedItem) && idPrefix(id) == prefixReasoning:
		t.think("")
		return nil
	case errors.Is(err, errItemsTooLarge):
		return badRequest(param, "input[%d].id: %v", i, err)
	case err != nil:
		return badRequest(param,
			"input[%d].id: item_reference %q: %v. vigil keeps no state: an item_reference resolves only to an item vigil answered whole "+
				"(not streamed), whose id carries it. Send the item itself instead (with the AI SDK: providerOptions.openai.store = false)", i, clipStr(id), err)
	}
	switch idPrefix(id) {
	case prefixCall:
		var f []string
		if json.Unmarshal([]byte(payload), &f) != nil || len(f) != 3 {
			return badRequest(param, "input[%d].id: item_reference %q: a malformed item id", i, clipStr(id))
		}
		t.call(&workerv1.ToolCall{Id: f[0], Type: "function", Name: f[1], Arguments: f[2]})
	case prefixReasoning:
		t.think(payload)
	default:
		t.message(&workerv1.Message{Role: "assistant", Content: payload})
	}
	return nil
}
