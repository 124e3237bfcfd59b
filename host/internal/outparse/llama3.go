package outparse

import "strings"

// llama3 is the tool-call parser of Llama 3.1 and 3.2's JSON-based tool
// calling: the output is (after optional whitespace and an optional
// "<|python_tag|>") a JSON object {"name": ..., "parameters": {...}}, or
// several separated by ";". Sources: Meta's Llama 3.1 prompt format,
// "JSON based tool calling" (llama.com/docs/model-cards-and-prompt-
// formats/llama3_1); vLLM's
// vllm/entrypoints/openai/tool_parsers/llama_tool_parser.py, whose
// streaming path this follows: an output that does not open with "{" or
// the tag is content, streamed at once.
//
// Choices beyond the sources:
//   - "arguments" is read as well as "parameters" (vLLM does), and
//     arguments written as a JSON string holding the object.
//   - A JSON object without "name" at the start is a JSON answer, not a
//     call: content, not counted as a failure.
//   - "<|python_tag|>" followed by anything but "{" is Llama's built-in
//     tool code (code interpreter, brave_search.call(...)), which vigil
//     does not run: it is content without the tag, as the user would see
//     it with special tokens skipped. A tag later in the content is read
//     the same way, so the tag never reaches the content.
//   - Text after the calls is content, whitespace only there dropped.
type llama3 struct {
	mode llamaMode
	buf  string          // text held while the mode cannot tell yet
	obj  strings.Builder // the call object's text so far
	scan jsonScan
}

type llamaMode int

const (
	llamaStart   llamaMode = iota // the output's start
	llamaTag                      // after "<|python_tag|>"
	llamaObject                   // inside a call's object
	llamaBetween                  // after a call
	llamaContent                  // content to the end (but a tag)
)

const pythonTag = "<|python_tag|>"

func newLlama3(Options) caller { return &llama3{} }

func (l *llama3) feed(text string) []piece {
	var out []piece
	for text != "" {
		switch l.mode {
		case llamaStart, llamaTag:
			text = l.start(text)
		case llamaObject:
			text = l.object(text, &out)
		case llamaBetween:
			text = l.between(text)
		default:
			text = l.content(text, &out)
		}
	}
	return out
}

// start reads the output's (or the tag's) start: "{" opens a call,
// anything else is content. It returns the text the next mode reads.
func (l *llama3) start(text string) string {
	l.buf += text
	return l.opening(strings.TrimLeft(l.buf, space), l.mode == llamaStart)
}

// opening reads s, the held text less its leading whitespace: "{" opens
// a call and, where tag, "<|python_tag|>" does; anything else is content.
func (l *llama3) opening(s string, tag bool) string {
	switch {
	case s == "" || tag && strings.HasPrefix(pythonTag, s):
		return "" // cannot tell yet
	case tag && strings.HasPrefix(s, pythonTag):
		l.buf, l.mode = "", llamaTag
		return s[len(pythonTag):]
	case s[0] == '{':
		l.buf = ""
		l.openObject()
		return s
	}
	s, l.buf, l.mode = l.buf, "", llamaContent
	return s
}

func (l *llama3) openObject() {
	l.mode, l.scan = llamaObject, jsonScan{}
	l.obj.Reset()
}

// object reads a call's object to its closing brace.
func (l *llama3) object(text string, out *[]piece) string {
	l.obj.WriteString(text)
	o := l.obj.String()
	end := l.scan.end(o)
	if end < 0 {
		return ""
	}
	*out = append(*out, l.piece(o[:end]))
	l.mode = llamaBetween
	return o[end:]
}

func (l *llama3) piece(obj string) piece {
	if !isCallObject(obj) {
		return piece{text: obj}
	}
	return piece{call: callOf(obj, obj)}
}

// between reads what follows a call: ";" and whitespace, then another
// call, or content.
func (l *llama3) between(text string) string {
	l.buf += text
	s := strings.TrimLeft(l.buf, space)
	if t, ok := strings.CutPrefix(s, ";"); ok {
		s = strings.TrimLeft(t, space)
	}
	return l.opening(s, true)
}

// content passes text through, but a tag begins a call again.
func (l *llama3) content(text string, out *[]piece) string {
	s := l.buf + text
	rest := ""
	if i := strings.Index(s, pythonTag); i >= 0 {
		s, rest = s[:i], s[i+len(pythonTag):]
		l.buf, l.mode = "", llamaTag
	} else {
		keep := heldPrefix(s, []string{pythonTag})
		s, l.buf = s[:len(s)-keep], s[len(s)-keep:]
	}
	if s != "" {
		*out = append(*out, piece{text: s})
	}
	return rest
}

func (l *llama3) finish() []piece {
	s := l.buf
	l.buf = ""
	switch l.mode {
	case llamaObject:
		o := l.obj.String()
		return []piece{{call: callOf(o, o)}} // not closed: malformed
	case llamaBetween:
		t := strings.TrimLeft(s, space)
		if t = strings.TrimLeft(strings.TrimPrefix(t, ";"), space); t == "" {
			return nil // the calls' trailing separators
		}
	}
	if s == "" {
		return nil
	}
	return []piece{{text: s}}
}
