package outparse

import "strings"

// harmony parses gpt-oss's harmony output, one state machine for both of
// vLLM's names: the reasoning parser openai_gptoss and the tool-call
// parser openai (vllm/reasoning/gptoss_reasoning_parser.py,
// vllm/entrypoints/openai/tool_parsers/openai_tool_parser.py). The format
// is openai/harmony's docs/format.md: the prompt ends with
// "<|start|>assistant" and the output is a sequence of messages, each a
// header, "<|message|>", a body and an end token:
//
//	<|channel|>analysis<|message|>...<|end|>            reasoning
//	<|start|>assistant<|channel|>commentary<|message|>...<|end|>   a preamble: content
//	<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
//	<|start|>assistant<|channel|>final<|message|>...<|return|>     content
//
// The recipient (to=) may be in the role's part of the header or the
// channel's ("<|start|>assistant to=functions.f<|channel|>commentary
// json<|message|>"). A message with a recipient (other than "assistant")
// is a call, its body the arguments; any other channel's body is content.
//
//   - Reasoning goes to Delta.Reasoning when the reasoning parser is
//     openai_gptoss (and thinking is not off), else it is dropped: the
//     analysis channel is never shown as content (format.md: it does not
//     meet the final channel's safety standards).
//   - Calls are parsed when the tool-call parser is openai and functions
//     are offered; else a call's message goes out as content as the model
//     wrote it, markup included, as other families' unparsed calls do.
//   - Content and reasoning stream as they come, only a possible
//     marker's start held back; a call is held until its message ends.
//   - Tolerated: a message without its end token at the output's end, or
//     ended by the next "<|start|>" or "<|channel|>"; text where a header
//     should be that cannot begin one is content (a model that wrote no
//     harmony markup); a header cut short at the end is dropped.
type harmony struct {
	reasoning, calls bool
	inBody           bool
	head             string // the current message's header
	kind             harmonyKind
	name             string // a call's function
	buf              string // text not given out: a header, a call's body, a marker's start
}

type harmonyKind int

const (
	harmonyContent harmonyKind = iota
	harmonyReasoning
	harmonyCall
)

// The harmony special tokens the parser reads (format.md, "Special
// tokens"); the decoder must keep them.
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	hCall      = "<|call|>"
	hReturn    = "<|return|>"
	hConstrain = "<|constrain|>"
)

var harmonyMarkers = []string{hStart, hChannel, hMessage, hEnd, hCall, hReturn, hConstrain}

// harmonyStops end a message's body: an end token, or (the end token
// missing) the next message's start.
var harmonyStops = []string{hEnd, hCall, hReturn, hStart, hChannel}

func newHarmony(_ Options, reasoning, calls bool) splitter {
	return &harmony{reasoning: reasoning, calls: calls}
}

// harmonyOut gathers one feed's output.
type harmonyOut struct {
	reasoning strings.Builder
	pieces    []piece
}

func (o *harmonyOut) text(s string) { o.pieces = appendText(o.pieces, s) }

func (h *harmony) feed(text string) (string, []piece) {
	h.buf += text
	var out harmonyOut
	for h.step(&out) {
	}
	return out.reasoning.String(), out.pieces
}

// step reads what it can of h.buf and reports whether to read on.
func (h *harmony) step(out *harmonyOut) bool {
	if !h.inBody {
		if h.plain() {
			h.inBody = true // content without a header
			return true
		}
		i := strings.Index(h.buf, hMessage)
		if i < 0 {
			return false
		}
		h.head, h.buf = h.buf[:i], h.buf[i+len(hMessage):]
		h.kind, h.name = harmonyHeader(h.head)
		h.inBody = true
		return true
	}
	at, stop := firstOf(h.buf, harmonyStops)
	if at < 0 {
		if h.kind != harmonyCall {
			keep := heldPrefix(h.buf, harmonyStops)
			h.body(out, h.buf[:len(h.buf)-keep])
			h.buf = h.buf[len(h.buf)-keep:]
		}
		return false
	}
	body := h.buf[:at]
	if stop == hStart || stop == hChannel {
		h.buf, stop = h.buf[at:], "" // the next header's
	} else {
		h.buf = h.buf[at+len(stop):]
	}
	h.end(out, body, stop)
	return true
}

// body gives out text of a content or reasoning message.
func (h *harmony) body(out *harmonyOut, s string) {
	switch h.kind {
	case harmonyContent:
		out.text(s)
	case harmonyReasoning:
		if h.reasoning {
			out.reasoning.WriteString(s)
		}
	}
}

// end ends the current message with the rest of its body and its end
// token ("" when it had none).
func (h *harmony) end(out *harmonyOut, body, stop string) {
	if h.kind != harmonyCall {
		h.body(out, body)
	} else if raw := h.head + hMessage + body + stop; h.calls {
		out.pieces = append(out.pieces, piece{call: &call{name: h.name, arguments: body, raw: raw}})
	} else {
		out.text(raw)
	}
	h.inBody, h.head, h.kind, h.name = false, "", harmonyContent, ""
}

func (h *harmony) finish() (string, []piece) {
	var out harmonyOut
	switch {
	case h.inBody:
		h.end(&out, h.buf, "")
	case !strings.Contains(h.buf, "<|"):
		out.text(h.buf) // no harmony markup: the model wrote plain text
	}
	h.buf = ""
	return out.reasoning.String(), out.pieces
}

// plain reports whether the text where a header should be cannot begin
// one (a special token or, in the first message, " to="): a model that
// wrote no harmony markup, whose text is content.
func (h *harmony) plain() bool {
	t := strings.TrimLeft(h.buf, " \t\r\n")
	for _, head := range []string{"<|", "to="} {
		if strings.HasPrefix(t, head) || strings.HasPrefix(head, t) {
			return false
		}
	}
	return true
}

// harmonyHeader reads a message's header: its kind and, for a call, the
// function's name. The role's part is after the last "<|start|>" (absent
// in the first message, whose role is in the prompt).
func harmonyHeader(head string) (harmonyKind, string) {
	if i := strings.LastIndex(head, hStart); i >= 0 {
		head = head[i+len(hStart):]
	}
	var to, channel string
	if i := strings.Index(head, "to="); i >= 0 {
		to = headerWord(head[i+len("to="):])
	}
	if i := strings.Index(head, hChannel); i >= 0 {
		channel = headerWord(head[i+len(hChannel):])
	}
	switch {
	case to != "" && to != "assistant":
		return harmonyCall, strings.TrimPrefix(to, "functions.")
	case channel == "analysis":
		return harmonyReasoning, ""
	}
	return harmonyContent, ""
}

// headerWord returns s's first word: up to a space or a special token.
func headerWord(s string) string {
	s = strings.TrimLeft(s, " ")
	if i := strings.IndexAny(s, " \t\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "<|"); i >= 0 {
		s = s[:i]
	}
	return s
}
