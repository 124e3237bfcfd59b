package outparse

import "strings"

// think is the <think>...</think> reasoner of DeepSeek R1 and Qwen3, as
// vLLM's deepseek_r1 and qwen3 parsers (vllm/reasoning/): the reasoning
// ends at "</think>", the rest is content.
//
//   - deepseek_r1: the output begins in reasoning (R1's template opens
//     the block in the prompt); a "<think>" at its start is dropped. An
//     output with no "</think>" is all reasoning, as vLLM's.
//   - qwen3: the output begins in reasoning only when it opens with
//     "<think>" or the prompt opened the block (Options.InReasoning); an
//     output that never opens one is all content.
//
// A call's opening (a tool-call parser's start) ends the reasoning too:
// models that skip "</think>" before a call would otherwise have it
// swallowed into reasoning_content (smg #2122).
type think struct {
	in      bool   // inside the reasoning block
	started bool   // past the output's opening (where "<think>" may be)
	buf     string // text held: a marker's possible start
	ends    []string
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

func newThink(r1 bool, o Options, callStarts []string) *think {
	return &think{in: r1 || o.InReasoning, ends: append([]string{thinkClose}, callStarts...)}
}

func (t *think) feed(text string) (string, string) {
	t.buf += text
	var reasoning, content strings.Builder
	if !t.started && !t.opening() {
		return "", ""
	}
	for t.buf != "" {
		if !t.in {
			content.WriteString(t.buf)
			t.buf = ""
			break
		}
		at, which := firstOf(t.buf, t.ends)
		if at < 0 {
			keep := heldPrefix(t.buf, t.ends)
			reasoning.WriteString(t.buf[:len(t.buf)-keep])
			t.buf = t.buf[len(t.buf)-keep:]
			break
		}
		reasoning.WriteString(t.buf[:at])
		t.in = false
		if which == thinkClose {
			at += len(thinkClose)
		}
		t.buf = t.buf[at:]
	}
	return reasoning.String(), content.String()
}

// opening reads the output's start: leading whitespace and "<think>"
// open the block; it reports whether the start is read (false: more
// text is needed to tell).
func (t *think) opening() bool {
	s := strings.TrimLeft(t.buf, " \t\r\n")
	switch {
	case strings.HasPrefix(s, thinkOpen):
		t.in, t.buf = true, s[len(thinkOpen):]
	case strings.HasPrefix(thinkOpen, s):
		return false // "", or a part of "<think>"
	}
	t.started = true
	return true
}

func (t *think) finish() (string, string) {
	t.started = true
	s := t.buf
	t.buf = ""
	if t.in {
		return s, ""
	}
	return "", s
}

// PromptOpensReasoning reports whether a rendered prompt leaves the
// output inside a reasoning block: its last "<think>" is after its last
// "</think>" (templates of thinking models end the generation prompt
// with "<think>\n").
func PromptOpensReasoning(prompt string) bool {
	open := strings.LastIndex(prompt, thinkOpen)
	return open >= 0 && open > strings.LastIndex(prompt, thinkClose)
}
