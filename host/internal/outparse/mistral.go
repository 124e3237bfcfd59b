package outparse

import (
	"encoding/json"
	"strings"
)

// mistral is the tool-call parser of Mistral's models, as vLLM's mistral
// parser (vllm/entrypoints/openai/tool_parsers/mistral_tool_parser.py)
// and mistral-common's tokenizers encode calls. Text before
// "[TOOL_CALLS]" is content; after it, one of two forms:
//
//	[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   tokenizers before v11
//	[TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}      v11 and later
//
// Tolerated: a single object for the array, "[CALL_ID]id" before
// "[ARGS]" (v13), a name followed by "{" without "[ARGS]" (vLLM's text
// form), and v11 calls one after another without a new "[TOOL_CALLS]".
// A call's raw text is "[TOOL_CALLS]" and the call (an array's element
// alone in the old form); one that cannot be read reaches the next
// "[TOOL_CALLS]" or the output's end.
type mistral struct {
	state mistralState
	buf   string // text not given out
}

type mistralState int

const (
	mistralText  mistralState = iota // content, before any call
	mistralCall                      // after "[TOOL_CALLS]"
	mistralBad                       // in a call that cannot be read
	mistralAfter                     // after a call: another, or content
)

// Mistral's control tokens (mistral-common's SpecialTokens); the decoder
// must keep them.
const (
	mistralCalls  = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

var mistralMarkers = []string{mistralCalls, mistralArgs, mistralCallID}

func newMistral(Options) caller { return &mistral{} }

func (m *mistral) feed(text string) []piece {
	m.buf += text
	var out []piece
	for m.step(&out) {
	}
	return out
}

// step reads what it can of m.buf and reports whether to read on.
func (m *mistral) step(out *[]piece) bool {
	switch m.state {
	case mistralText:
		i := strings.Index(m.buf, mistralCalls)
		if i < 0 {
			keep := heldPrefix(m.buf, []string{mistralCalls})
			*out = appendText(*out, m.buf[:len(m.buf)-keep])
			m.buf = m.buf[len(m.buf)-keep:]
			return false
		}
		*out = appendText(*out, m.buf[:i])
		m.buf, m.state = m.buf[i+len(mistralCalls):], mistralCall
		return true
	case mistralCall:
		ps, n, ok := mistralParse(m.buf)
		switch {
		case !ok:
			m.state = mistralBad
		case n == 0 && strings.Contains(m.buf, mistralCalls):
			m.state = mistralBad // cut short by the next call
		case n == 0:
			return false
		default:
			*out = append(*out, ps...)
			m.buf, m.state = m.buf[n:], mistralAfter
		}
		return true
	case mistralBad:
		i := strings.Index(m.buf, mistralCalls)
		if i < 0 {
			return false
		}
		*out = append(*out, unparsed(mistralCalls+m.buf[:i]))
		m.buf, m.state = m.buf[i+len(mistralCalls):], mistralCall
		return true
	}
	return m.after()
}

// after reads what follows a call: another call, or content.
func (m *mistral) after() bool {
	t := strings.TrimLeft(m.buf, " \t\r\n,")
	switch {
	case strings.HasPrefix(t, mistralCalls):
		m.buf, m.state = t[len(mistralCalls):], mistralCall
		return true
	case t == "" || strings.HasPrefix(mistralCalls, t):
		return false
	}
	name := len(t) - len(strings.TrimLeft(t, mistralNameBytes))
	switch rest := t[name:]; {
	case name > 0 && rest == "":
		return false // a name, or a word of content
	case name > 0 && (rest[0] == '{' || strings.HasPrefix(rest, mistralArgs) || strings.HasPrefix(rest, mistralCallID)):
		m.buf, m.state = t, mistralCall // v11 calls one after another
	case name > 0 && (strings.HasPrefix(mistralArgs, rest) || strings.HasPrefix(mistralCallID, rest)):
		return false
	default:
		m.state = mistralText // content, which may hold another call
	}
	return true
}

func (m *mistral) finish() []piece {
	var out []piece
	switch m.state {
	case mistralText:
		out = appendText(out, m.buf)
	case mistralCall, mistralBad:
		out = append(out, unparsed(mistralCalls+m.buf))
	case mistralAfter:
		if strings.TrimLeft(m.buf, " \t\r\n,") != "" {
			out = appendText(out, m.buf)
		}
	}
	m.buf = ""
	return out
}

// mistralNameBytes are the bytes of a function's name (vLLM's
// [a-zA-Z0-9_-]).
const mistralNameBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

// mistralParse reads the calls s (after "[TOOL_CALLS]") begins with: the
// pieces and the bytes they took, n 0 when more text is needed; ok false
// when s cannot begin a call.
func mistralParse(s string) (ps []piece, n int, ok bool) {
	t := strings.TrimLeft(s, " \t\r\n")
	lead := len(s) - len(t)
	if t == "" {
		return nil, 0, true
	}
	if t[0] == '[' || t[0] == '{' {
		end := valueEnd(t)
		if end < 0 {
			return nil, 0, true
		}
		return mistralArray(t[:end], mistralCalls+s[:lead+end]), lead + end, true
	}
	c, n, ok := mistralNamed(t)
	if n == 0 || !ok {
		return nil, 0, ok
	}
	c.raw = mistralCalls + s[:lead+n]
	return []piece{{call: c}}, lead + n, true
}

// mistralArray reads the old form's array (or one object) of calls;
// raw is the whole text, for an array that does not parse.
func mistralArray(text, raw string) []piece {
	elems := []json.RawMessage{json.RawMessage(text)}
	if text[0] == '[' && json.Unmarshal([]byte(text), &elems) != nil {
		return []piece{unparsed(raw)}
	}
	ps := make([]piece, 0, len(elems))
	for _, e := range elems {
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal(e, &c) != nil {
			ps = append(ps, unparsed(string(e)))
			continue
		}
		ps = append(ps, piece{call: &call{name: c.Name, arguments: string(c.Arguments), raw: string(e)}})
	}
	return ps
}

// mistralNamed reads the v11 form "f[ARGS]{...}" s begins with: the call
// and its length, 0 when more text is needed; ok false when s is not one.
func mistralNamed(s string) (*call, int, bool) {
	rest := strings.TrimLeft(s, mistralNameBytes)
	name := s[:len(s)-len(rest)]
	if strings.HasPrefix(rest, mistralCallID) {
		i := strings.Index(rest, mistralArgs)
		if i < 0 {
			return nil, 0, !strings.ContainsAny(rest, "{")
		}
		rest = rest[i:] // the model's own id: vigil gives its own
	}
	switch {
	case rest == "" || strings.HasPrefix(mistralArgs, rest) || strings.HasPrefix(mistralCallID, rest):
		return nil, 0, true
	case strings.HasPrefix(rest, mistralArgs):
		rest = rest[len(mistralArgs):]
	case rest[0] != '{':
		return nil, 0, false
	}
	if name == "" {
		return nil, 0, false
	}
	args := strings.TrimLeft(rest, " \t\r\n")
	switch {
	case args == "":
		return nil, 0, true
	case args[0] != '{':
		return nil, 0, false
	}
	end := valueEnd(args)
	if end < 0 {
		return nil, 0, true
	}
	n := len(s) - len(args) + end
	return &call{name: name, arguments: args[:end]}, n, true
}
