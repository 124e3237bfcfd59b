// Package outparse finds reasoning and tool calls in a model's streamed
// output text, as the engines' own servers do (vLLM's reasoning and
// tool-call parsers): the engines' gRPC APIs give text only, so the worker
// parses it. A Parser is fed the output's text in pieces of any size and
// keeps its own state, so a marker split across pieces is still found and
// never reaches the content.
//
// A call is held until it is complete and checked (its arguments a JSON
// object, its function one offered): a malformed call goes out as the
// text it was, as content, and is counted, instead of breaking the
// stream (the "bad output"). It then goes out as two pieces, as
// OpenAI streams one: its id and name, then its arguments.
package outparse

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Delta is what one Feed or Finish gives out.
type Delta struct {
	// Content is the answer's new text, no markup in it.
	Content string
	// Reasoning is new reasoning text (reasoning_content).
	Reasoning string
	// Calls are new pieces of tool calls, in order.
	Calls []CallPiece
}

// CallPiece is a piece of one tool call: the first of a call has its ID
// and Name, a later one more of its Arguments (JSON text).
type CallPiece struct {
	Index               int
	ID, Name, Arguments string
}

// Options are a Parser's inputs beside the parser names.
type Options struct {
	// InReasoning: the prompt opened the reasoning block (a template that
	// ends the generation prompt with "<think>"), so the output begins in
	// it; see PromptOpensReasoning.
	InReasoning bool
	// Functions are the names of the functions offered; a call to
	// another is content. Nil: tools are not parsed (none offered).
	Functions []string
	// NewID returns a new call id; nil: "call_" and the call's number.
	NewID func() string
	// ReasoningOff: the request turned thinking off (Qwen3's
	// enable_thinking false), so output is content from its start.
	ReasoningOff bool
	// Choice is how tool_choice constrained the output: "" (auto: calls
	// found by the family's tags), ChoiceRequired (the output is the
	// JSON array RequiredSchema describes), or a function's name (the
	// output is that call's arguments, NamedSchema). Set, it replaces
	// the family's parser.
	Choice string
}

// Call is one complete tool call a caller found.
type call struct {
	name, arguments string
	raw             string // the call's text as the model wrote it, for a failure
}

// piece is a caller's output: content text, or a complete call.
type piece struct {
	text string
	call *call
}

// reasoner splits text into reasoning and content.
type reasoner interface {
	feed(text string) (reasoning, content string)
	finish() (reasoning, content string)
}

// caller finds tool calls in content text.
type caller interface {
	feed(text string) []piece
	finish() []piece
}

// splitter parses an output whose one markup carries reasoning and calls
// both (gpt-oss's harmony), which a reasoner and a caller cannot split.
type splitter interface {
	feed(text string) (reasoning string, pieces []piece)
	finish() (reasoning string, pieces []piece)
}

// family is a parser name's constructors and the special tokens its
// markup uses (which the decoder must keep in the text).
type family struct {
	reasoner func(o Options, callStarts []string) reasoner
	caller   func(o Options) caller
	// whole, when set, parses the output alone, both roles in one state
	// machine: reasoning kept when the reasoning parser is its own, calls
	// parsed when the tool-call parser is its own (and tools offered).
	whole func(o Options, reasoning, calls bool) splitter
	// starts are the texts that begin a call, where reasoning ends too:
	// a call is never swallowed into reasoning.
	starts []string
	// markers are special tokens the parser reads; the decoder keeps them.
	markers []string
}

// reasoningParsers and toolCallParsers are the parsers by the names vLLM
// gives them (--reasoning-parser, --tool-call-parser).
var reasoningParsers = map[string]family{
	"deepseek_r1": {reasoner: func(o Options, s []string) reasoner { return newThink(true, o, s) }},
	"qwen3":       {reasoner: func(o Options, s []string) reasoner { return newThink(false, o, s) }},

	"openai_gptoss": {whole: newHarmony, markers: harmonyMarkers},
}

var toolCallParsers = map[string]family{
	"hermes":      {caller: newHermes, starts: []string{hermesOpen}},
	"llama3_json": {caller: newLlama3, starts: []string{pythonTag}, markers: []string{pythonTag}},
	"openai":      {whole: newHarmony, markers: harmonyMarkers},
	"mistral":     {caller: newMistral, starts: []string{mistralCalls}, markers: mistralMarkers},
	"deepseek_v3": {caller: newDeepSeekV3, starts: []string{dsCallsBegin}, markers: deepSeekV3Markers},
}

// None turns a parser off.
const None = "none"

// ReasoningParsers returns the reasoning parsers' names, sorted, "none"
// included.
func ReasoningParsers() []string { return names(reasoningParsers) }

// ToolCallParsers returns the tool-call parsers' names, sorted, "none"
// included.
func ToolCallParsers() []string { return names(toolCallParsers) }

func names(m map[string]family) []string {
	out := []string{None}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Check returns an error naming flag when name is not a parser of kind.
func Check(flag, name string, tool bool) error {
	m, list := reasoningParsers, ReasoningParsers
	if tool {
		m, list = toolCallParsers, ToolCallParsers
	}
	if _, ok := m[name]; !ok && name != None && name != "" {
		return fmt.Errorf("%s: %q is not a parser here; want one of %s", flag, name, strings.Join(list(), ", "))
	}
	return nil
}

// Markers returns the special tokens the named parsers read in the text.
func Markers(reasoning, toolCall string) []string {
	var out []string
	out = append(out, reasoningParsers[reasoning].markers...)
	for _, m := range toolCallParsers[toolCall].markers {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Parser is one output's reasoning and tool-call parser.
type Parser struct {
	r        reasoner // nil: no reasoning parser
	c        caller   // nil: no tool calls parsed
	w        splitter // not nil: it alone parses the output (r, c nil)
	opts     Options
	calls    int
	failures int
}

// New returns the parser of one output; "" or "none" turns either part
// off. A tool-call parser works only when opts.Functions is not nil;
// opts.Choice, when set, picks the tool_choice JSON parser whatever
// toolCall is.
func New(reasoning, toolCall string, opts Options) (*Parser, error) {
	if err := Check("reasoning parser", reasoning, false); err != nil {
		return nil, err
	}
	if err := Check("tool-call parser", toolCall, true); err != nil {
		return nil, err
	}
	p := &Parser{opts: opts}
	tf := toolCallParsers[toolCall]
	if opts.Choice != "" {
		if opts.Choice != ChoiceRequired && opts.Functions != nil && !slices.Contains(opts.Functions, opts.Choice) {
			return nil, fmt.Errorf("tool_choice: function %q is not among the tools (%s)", opts.Choice, strings.Join(opts.Functions, ", "))
		}
		tf = family{caller: choiceCaller(opts.Choice)} // no tags: reasoning ends by its own markup
	} else if rf := reasoningParsers[reasoning]; rf.whole != nil || tf.whole != nil {
		if err := p.newWhole(reasoning, toolCall, rf, tf); err != nil {
			return nil, err
		}
		return p, nil
	}
	if tf.caller != nil && opts.Functions != nil {
		p.c = tf.caller(opts)
	}
	if rf := reasoningParsers[reasoning]; rf.reasoner != nil && !opts.ReasoningOff {
		var starts []string
		if p.c != nil {
			starts = tf.starts
		}
		p.r = rf.reasoner(opts, starts)
	}
	return p, nil
}

// newWhole sets p.w for a family that parses the output alone; the
// other parser must be of the same family or none.
func (p *Parser) newWhole(reasoning, toolCall string, rf, tf family) error {
	if (rf.whole == nil && rf.reasoner != nil) || (tf.whole == nil && tf.caller != nil) {
		return fmt.Errorf("reasoning parser %q and tool-call parser %q read different output formats; "+
			"set one of them to %q", reasoning, toolCall, None)
	}
	whole := rf.whole
	if whole == nil {
		whole = tf.whole
	}
	p.w = whole(p.opts, rf.whole != nil && !p.opts.ReasoningOff, tf.whole != nil && p.opts.Functions != nil)
	return nil
}

// Feed parses the next piece of output text.
func (p *Parser) Feed(text string) Delta {
	if p.w != nil {
		r, pieces := p.w.feed(text)
		return p.emit(Delta{Reasoning: r}, pieces)
	}
	if p.r == nil {
		return p.content(Delta{}, text, false)
	}
	r, c := p.r.feed(text)
	return p.content(Delta{Reasoning: r}, c, false)
}

// Finish parses what is held at the end of the output: a call without
// its closing markup is taken as it is, when it parses.
func (p *Parser) Finish() Delta {
	if p.w != nil {
		r, pieces := p.w.finish()
		return p.emit(Delta{Reasoning: r}, pieces)
	}
	if p.r == nil {
		return p.content(Delta{}, "", true)
	}
	r, c := p.r.finish()
	return p.content(Delta{Reasoning: r}, c, true)
}

// Calls returns how many calls went out.
func (p *Parser) Calls() int { return p.calls }

// Failures returns how many calls went out as content, malformed.
func (p *Parser) Failures() int { return p.failures }

// content passes content text through the caller into d.
func (p *Parser) content(d Delta, text string, last bool) Delta {
	if p.c == nil {
		d.Content = text
		return d
	}
	var pieces []piece
	if text != "" {
		pieces = p.c.feed(text)
	}
	if last {
		pieces = append(pieces, p.c.finish()...)
	}
	return p.emit(d, pieces)
}

// emit adds a caller's pieces to d: text as content, a call checked.
func (p *Parser) emit(d Delta, pieces []piece) Delta {
	var b strings.Builder
	for _, pc := range pieces {
		if pc.call == nil {
			b.WriteString(pc.text)
			continue
		}
		args, ok := p.check(pc.call)
		if !ok {
			p.failures++
			b.WriteString(pc.call.raw)
			continue
		}
		d.Calls = append(d.Calls, CallPiece{Index: p.calls, ID: p.newID(), Name: pc.call.name},
			CallPiece{Index: p.calls, Arguments: args})
		p.calls++
	}
	d.Content = b.String()
	return d
}

// check reports whether c names an offered function with arguments that
// are a JSON object, and returns the arguments compacted ("{}" for none).
func (p *Parser) check(c *call) (string, bool) {
	if !slices.Contains(p.opts.Functions, c.name) {
		return "", false
	}
	args := strings.TrimSpace(c.arguments)
	if args == "" {
		return "{}", true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return "", false
	}
	return args, true
}

func (p *Parser) newID() string {
	if p.opts.NewID != nil {
		return p.opts.NewID()
	}
	return fmt.Sprintf("call_%d", p.calls)
}
