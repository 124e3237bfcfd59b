package outparse

import "strings"

// deepSeekV3 is the tool-call parser of DeepSeek V3, as vLLM's
// deepseek_v3 (vllm/entrypoints/openai/tool_parsers/deepseekv3_tool_parser.py)
// and the calls DeepSeek V3's chat template renders
// (deepseek-ai/DeepSeek-V3, tokenizer_config.json): text before the
// calls is content, then
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{"arg": 1}
//	```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//
// (the bars are fullwidth U+FF5C, the spaces U+2581). Tolerated:
// arguments without the ```json fence, a call without its end token
// (ended by the next call, the calls' end, or the output's end), the
// calls' end token missing, and whitespace between calls. A call's raw
// text is from its begin token to its end token.
type deepSeekV3 struct {
	state deepSeekState
	open  string // the token that began the current call ("" when none did)
	buf   string // text not given out
}

type deepSeekState int

const (
	deepSeekText  deepSeekState = iota // content
	deepSeekCalls                      // between calls
	deepSeekCall                       // in a call
)

// DeepSeek V3's tool-call tokens (added tokens of its tokenizer); the
// decoder must keep them.
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

var deepSeekV3Markers = []string{dsCallsBegin, dsCallsEnd, dsCallBegin, dsCallEnd, dsSep}

func newDeepSeekV3(Options) caller { return &deepSeekV3{} }

func (d *deepSeekV3) feed(text string) []piece {
	d.buf += text
	var out []piece
	for d.step(&out) {
	}
	return out
}

// step reads what it can of d.buf and reports whether to read on.
func (d *deepSeekV3) step(out *[]piece) bool {
	switch d.state {
	case deepSeekText:
		i := strings.Index(d.buf, dsCallsBegin)
		if i < 0 {
			keep := heldPrefix(d.buf, []string{dsCallsBegin})
			*out = appendText(*out, d.buf[:len(d.buf)-keep])
			d.buf = d.buf[len(d.buf)-keep:]
			return false
		}
		*out = appendText(*out, d.buf[:i])
		d.buf, d.state = d.buf[i+len(dsCallsBegin):], deepSeekCalls
		return true
	case deepSeekCalls:
		t := strings.TrimLeft(d.buf, " \t\r\n")
		switch {
		case strings.HasPrefix(t, dsCallBegin):
			d.buf, d.state, d.open = t[len(dsCallBegin):], deepSeekCall, dsCallBegin
		case strings.HasPrefix(t, dsCallsEnd):
			d.buf, d.state = t[len(dsCallsEnd):], deepSeekText
		case t == "" || strings.HasPrefix(dsCallBegin, t) || strings.HasPrefix(dsCallsEnd, t):
			return false
		default:
			d.buf, d.state, d.open = t, deepSeekCall, "" // a call without its begin token
		}
		return true
	}
	at, which := firstOf(d.buf, []string{dsCallEnd, dsCallBegin, dsCallsEnd})
	if at < 0 {
		return false
	}
	end := ""
	if which == dsCallEnd {
		end = which
	}
	*out = append(*out, deepSeekParse(d.buf[:at], d.open+d.buf[:at]+end))
	d.buf, d.state = d.buf[at+len(end):], deepSeekCalls
	return true
}

func (d *deepSeekV3) finish() []piece {
	var out []piece
	switch d.state {
	case deepSeekText:
		out = appendText(out, d.buf)
	case deepSeekCall:
		out = append(out, deepSeekParse(d.buf, d.open+d.buf))
	}
	d.buf = "" // between calls: whitespace, or a token cut short
	return out
}

// deepSeekParse reads one call, "function<｜tool▁sep｜>NAME\n```json\n{...}\n```".
func deepSeekParse(text, raw string) piece {
	i := strings.Index(text, dsSep)
	if i < 0 {
		return unparsed(raw)
	}
	rest := text[i+len(dsSep):]
	j := len(rest)
	if k := strings.IndexAny(rest, "\n`{"); k >= 0 {
		j = k
	}
	args := strings.TrimSpace(rest[j:])
	if fenced, ok := strings.CutPrefix(args, "```"); ok {
		fenced = strings.TrimPrefix(fenced, "json")
		args = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(fenced), "```"))
	}
	return piece{call: &call{name: strings.TrimSpace(rest[:j]), arguments: args, raw: raw}}
}
