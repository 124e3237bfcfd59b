package outparse

import "strings"

// hermes is the tool-call parser of Hermes 2 Pro, Qwen2.5 and Qwen3:
// each call is a JSON object {"name": ..., "arguments": {...}} between
// "<tool_call>" and "</tool_call>", several in a row, text before them
// is content. Sources: vLLM's
// vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py; Qwen's
// function-calling guide (qwen.readthedocs.io, "Function Calling",
// Hermes-style template); NousResearch/Hermes-Function-Calling.
//
// Tolerant where models are sloppy, as vLLM's is: whitespace around the
// JSON; a call left open at the end of the output (read at finish); a
// "<tool_call>" before the last call closed (it ends that call);
// arguments written as a JSON string holding the object. Text between
// or after calls is content, but whitespace only there is dropped (the
// newlines models put between calls are markup). "<tool_call>" is an
// ordinary added token in Qwen's tokenizer, so there is no marker.
type hermes struct {
	in    bool            // inside a call, after its "<tool_call>"
	body  strings.Builder // the call's text so far
	from  int             // bytes of body searched for the call's end
	held  string          // content held: a possible start of "<tool_call>"
	ws    string          // whitespace held after a call
	after bool            // a call ended; only whitespace since
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

var hermesEnds = []string{hermesClose, hermesOpen}

func newHermes(Options) caller { return &hermes{} }

func (h *hermes) feed(text string) []piece {
	var out []piece
	for text != "" {
		if h.in {
			text = h.inCall(text, &out)
		} else {
			text = h.inContent(text, &out)
		}
	}
	return out
}

// inContent reads content up to a call's opening and returns the text
// after it ("" when none is in text).
func (h *hermes) inContent(text string, out *[]piece) string {
	s := h.held + text
	h.held = ""
	if h.after {
		t := strings.TrimLeft(s, space)
		h.ws += s[:len(s)-len(t)]
		if s = t; s == "" {
			return ""
		}
	}
	rest := ""
	if i := strings.Index(s, hermesOpen); i >= 0 {
		s, rest = s[:i], s[i+len(hermesOpen):]
		h.in, h.from = true, 0
		h.body.Reset()
	} else {
		keep := heldPrefix(s, hermesEnds[1:])
		s, h.held = s[:len(s)-keep], s[len(s)-keep:]
	}
	if s != "" {
		*out = append(*out, piece{text: h.ws + s})
		h.after = false
	}
	if s != "" || h.in {
		h.ws = ""
	}
	return rest
}

// inCall reads a call's text up to its end and returns the text after.
func (h *hermes) inCall(text string, out *[]piece) string {
	h.body.WriteString(text)
	b := h.body.String()
	start := max(0, h.from-len(hermesClose)+1)
	at, which := firstOf(b[start:], hermesEnds)
	if at < 0 {
		h.from = len(b)
		return ""
	}
	at += start
	rest := b[at:] // a new "<tool_call>" opens the next call
	raw := hermesOpen + b[:at]
	if which == hermesClose {
		rest = b[at+len(hermesClose):]
		raw += hermesClose
	}
	*out = append(*out, piece{call: callOf(b[:at], raw)})
	h.in, h.after = false, true
	return rest
}

func (h *hermes) finish() []piece {
	if h.in {
		b := h.body.String()
		h.in = false
		return []piece{{call: callOf(b, hermesOpen+b)}}
	}
	if h.held == "" {
		return nil // whitespace after a call is dropped
	}
	s := h.ws + h.held
	h.ws, h.held = "", ""
	return []piece{{text: s}}
}
