package endpoint

import (
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Parsers is what a wrapped engine (Prompts) that parses chat output
// does: textgen's reasoning and tool-call parsers, after its stop
// strings. Tool calls and reasoning never cross the plugin boundary.
type Parsers interface {
	// ParsesToolCalls and ParsesReasoning report whether a tool-call and
	// a reasoning parser are on (capabilities tools and reasoning).
	ParsesToolCalls() bool
	ParsesReasoning() bool
	// Parsing returns how a chat request's output is parsed, prompt
	// being its rendered text: newParser makes one choice's parser (nil:
	// the output passes as it is), and schema, JSON schema text,
	// constrains the output to calls (tool_choice required or a named
	// function; "" for none). Its errors are INVALID_ARGUMENT naming the
	// field.
	Parsing(chat *workerv1.Messages, prompt string) (newParser func() ParseFunc, schema string, err error)
}

// ParseFunc parses one choice's next text into chunk's text,
// reasoning_text and tool_calls; last: the output ended, and what the
// parser held goes out. It returns the calls that went out so far and
// those returned as content (malformed, or to a function not offered).
// An alias, so that textgen names the same type without importing this
// package.
type ParseFunc = func(text string, last bool, chunk *workerv1.Chunk) (calls, failures int)

// ToolCallObserver is an Observer that counts tool calls returned as
// content (vigil_tool_call_parse_failures_total) and calls dropped by
// parallel_tool_calls false.
type ToolCallObserver interface {
	ToolCalls(failures, dropped int)
}

// choiceParsers is a request's parsers, one per choice, made when the
// choice's first text comes.
type choiceParsers struct {
	new      func() ParseFunc
	single   bool // parallel_tool_calls false: the first call only
	parsers  []ParseFunc
	calls    []int // calls that went out, per choice
	failures []int // calls returned as content, per choice
	dropped  []int // calls dropped, per choice
	finished []bool
}

func newChoiceParsers(newParser func() ParseFunc, chat *workerv1.Messages, n uint32) *choiceParsers {
	if newParser == nil {
		return nil
	}
	return &choiceParsers{new: newParser, single: chat.ParallelToolCalls != nil && !*chat.ParallelToolCalls,
		parsers: make([]ParseFunc, n), calls: make([]int, n), failures: make([]int, n), dropped: make([]int, n), finished: make([]bool, n)}
}

// feed parses choice i's text into chunk; last finishes the choice.
func (c *choiceParsers) feed(i uint32, text string, last bool, chunk *workerv1.Chunk) {
	if c.parsers[i] == nil {
		c.parsers[i] = c.new()
	}
	if last {
		if c.finished[i] {
			return
		}
		c.finished[i] = true
	}
	c.calls[i], c.failures[i] = c.parsers[i](text, last, chunk)
	chunk.ToolCalls = c.keep(i, chunk.ToolCalls)
}

// keep drops, with parallel_tool_calls false, the pieces of every call
// but the first.
func (c *choiceParsers) keep(i uint32, calls []*workerv1.ToolCallDelta) []*workerv1.ToolCallDelta {
	if !c.single {
		return calls
	}
	out := calls[:0]
	for _, d := range calls {
		switch {
		case d.Index == 0:
			out = append(out, d)
		case d.Name != "":
			c.dropped[i]++
		}
	}
	return out
}

// finishReason is choice i's finish reason: a stop after calls is
// tool_calls, as vLLM's server says it.
func (c *choiceParsers) finishReason(i uint32, r workerv1.FinishReason) workerv1.FinishReason {
	if c != nil && c.calls[i] > 0 && r == workerv1.FinishReason_FINISH_REASON_STOP {
		return workerv1.FinishReason_FINISH_REASON_TOOL_CALLS
	}
	return r
}

// counts are the calls returned as content and those dropped.
func (c *choiceParsers) counts() (failures, dropped int) {
	for i := range c.parsers {
		failures += c.failures[i]
		dropped += c.dropped[i]
	}
	return failures, dropped
}

// toolSchema is the structured output that constrains the output to
// calls; it refuses, naming tool_choice, an engine without json_schema
// and a request with its own structured output.
func toolSchema(schema string, req *workerv1.GenerateRequest, a accepts) (*workerv1.StructuredOutput, error) {
	switch {
	case schema == "":
		return req.GetStructuredOutput(), nil
	case req.GetStructuredOutput() != nil:
		return nil, status.Error(codes.InvalidArgument, "prompt.messages.tool_choice: a required or named tool choice constrains the output itself; "+
			"it cannot be combined with structured_output (response_format)")
	case !a.takes("json_schema"):
		return nil, status.Error(codes.InvalidArgument, "prompt.messages.tool_choice: required and a named function need the engine's structured "+
			"output (json_schema), which this worker's engine does not take; send tool_choice auto")
	}
	return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonSchema{JsonSchema: &workerv1.JsonSchema{Schema: schema}}}, nil
}
