package outparse

import "strings"

// The callers of tool_choice "required" and a named function, whose
// output the engine's structured output constrains to vLLM's JSON forms
// (RequiredSchema, NamedSchema), so it is parsed as JSON, not by the
// family's tags. Source: vLLM's vllm/entrypoints/openai/protocol.py
// (ChatCompletionRequest._get_guided_json_from_tool) and serving_chat.py
// (the "required" output read as a list of {name, parameters}).

// ChoiceRequired is the Options.Choice of tool_choice "required".
const ChoiceRequired = "required"

// choiceCaller returns the constructor of choice's caller.
func choiceCaller(choice string) func(Options) caller {
	if choice == ChoiceRequired {
		return func(Options) caller { return &requiredCalls{} }
	}
	return func(Options) caller { return &namedCall{name: choice} }
}

// requiredCalls reads the array [{"name": ..., "parameters": {...}},
// ...]. Each element is a call, checked on its own; when the array's
// shape breaks, the rest of the output is content, counted once as a
// failure.
type requiredCalls struct {
	state int    // reqOpen, reqNext, reqObject, reqDone, reqBroken
	buf   string // text held while the state cannot tell yet
	obj   strings.Builder
	scan  jsonScan
}

const (
	reqOpen   = iota // before "["
	reqNext          // after an element: "," or "]"
	reqObject        // inside an element
	reqDone          // after "]"
	reqBroken        // not the array: content
)

func (r *requiredCalls) feed(text string) []piece {
	var out []piece
	for text != "" {
		switch r.state {
		case reqOpen, reqNext:
			text = r.between(text, &out)
		case reqObject:
			text = r.object(text, &out)
		case reqDone:
			text = r.done(text, &out)
		default:
			out = append(out, piece{text: text})
			text = ""
		}
	}
	return out
}

// between reads "[" (reqOpen) or "," / "]" (reqNext) and the next
// element's "{".
func (r *requiredCalls) between(text string, out *[]piece) string {
	r.buf += text
	s := strings.TrimLeft(r.buf, space)
	want := byte('[')
	if r.state == reqNext {
		want = ','
	}
	if s == "" {
		return ""
	}
	if s[0] == ']' && r.state == reqNext {
		r.buf, r.state = "", reqDone
		return s[1:]
	}
	if s[0] != want {
		return r.broken(out)
	}
	t := strings.TrimLeft(s[1:], space)
	switch {
	case t == "":
		return ""
	case t[0] == ']' && r.state == reqOpen:
		r.buf, r.state = "", reqDone // [], no call
		return t[1:]
	case t[0] != '{':
		return r.broken(out)
	}
	r.buf, r.state, r.scan = "", reqObject, jsonScan{}
	r.obj.Reset()
	return t
}

// broken sends what is held as a failed call's text: from here on the
// output is content.
func (r *requiredCalls) broken(out *[]piece) string {
	*out = append(*out, piece{call: &call{raw: r.buf}})
	r.buf, r.state = "", reqBroken
	return ""
}

func (r *requiredCalls) object(text string, out *[]piece) string {
	r.obj.WriteString(text)
	o := r.obj.String()
	end := r.scan.end(o)
	if end < 0 {
		return ""
	}
	*out = append(*out, piece{call: callOf(o[:end], o[:end])})
	r.state = reqNext
	return o[end:]
}

// done drops whitespace after the array; other text is content.
func (r *requiredCalls) done(text string, out *[]piece) string {
	r.buf += text
	if strings.TrimLeft(r.buf, space) != "" {
		*out = append(*out, piece{text: r.buf})
		r.buf, r.state = "", reqBroken
	}
	return ""
}

func (r *requiredCalls) finish() []piece {
	switch r.state {
	case reqObject:
		o := r.obj.String()
		return []piece{{call: callOf(o, o)}} // not closed: malformed
	case reqOpen:
		if strings.TrimLeft(r.buf, space) != "" {
			return []piece{{call: &call{raw: r.buf}}} // "[" and no element
		}
	}
	return nil // after an element, an unclosed array is taken as closed
}

// namedCall reads an output that is the chosen function's arguments
// object: the call ends at its closing brace; whitespace after it is
// dropped, other text is content. An output that is not an object goes
// out as content, counted.
type namedCall struct {
	name  string
	state int
	buf   strings.Builder
	scan  jsonScan
}

const (
	namedStart  = iota // before the object
	namedObject        // inside it
	namedOther         // not an object: held to the end
	namedAfter         // after it: whitespace held
	namedText          // after it: content
)

func (n *namedCall) feed(text string) []piece {
	if n.state >= namedAfter {
		return n.after(text)
	}
	n.buf.WriteString(text)
	s := n.buf.String()
	if n.state == namedStart {
		t := strings.TrimLeft(s, space)
		if t == "" {
			return nil
		}
		n.state = namedObject
		if t[0] != '{' {
			n.state = namedOther
		}
		n.buf.Reset()
		n.buf.WriteString(t)
		s = t
	}
	end := -1
	if n.state == namedObject {
		end = n.scan.end(s)
	}
	if end < 0 {
		return nil
	}
	n.state = namedAfter
	n.buf.Reset()
	c := &call{name: n.name, arguments: s[:end], raw: s[:end]}
	return append([]piece{{call: c}}, n.after(s[end:])...)
}

// after drops whitespace after the object; other text is content.
func (n *namedCall) after(text string) []piece {
	if n.state == namedAfter {
		n.buf.WriteString(text)
		if strings.TrimLeft(n.buf.String(), space) == "" {
			return nil
		}
		text, n.state = n.buf.String(), namedText
		n.buf.Reset()
	}
	if text == "" {
		return nil
	}
	return []piece{{text: text}}
}

func (n *namedCall) finish() []piece {
	if n.state != namedObject && n.state != namedOther {
		return nil
	}
	s := n.buf.String()
	n.state = namedText
	return []piece{{call: &call{name: n.name, arguments: s, raw: s}}}
}
