package textgen

import (
	"crypto/rand"
	"encoding/json"

	"github.com/vigilhq/vigil/host/internal/outparse"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ParseFunc parses one choice's next text into chunk (endpoint's
// ParseFunc: the same type).
type ParseFunc = func(text string, last bool, chunk *workerv1.Chunk) (calls, failures int)

// WithParsers turns on the reasoning and tool-call parsers of those names
// (outparse's, vLLM's names; "" or "none": off) for chat output. The
// names are checked by the caller (outparse.Check).
func (e *Engine) WithParsers(reasoning, toolCall string) *Engine {
	e.reasoning, e.toolCall = reasoning, toolCall
	return e
}

// ParsesToolCalls reports whether a tool-call parser is on.
func (e *Engine) ParsesToolCalls() bool { return on(e.toolCall) }

// ParsesReasoning reports whether a reasoning parser is on.
func (e *Engine) ParsesReasoning() bool { return on(e.reasoning) }

func on(name string) bool { return name != "" && name != outparse.None }

// Parsing returns a chat's output parsers: reasoning when a reasoning
// parser is on, tool calls when tools are offered and tool_choice is not
// none; for tool_choice required or a named function, the schema that
// constrains the output and a parser of vLLM's JSON forms for them.
func (e *Engine) Parsing(chat *workerv1.Messages, prompt string) (func() ParseFunc, string, error) {
	opts := outparse.Options{InReasoning: outparse.PromptOpensReasoning(prompt), NewID: newCallID}
	tools, schema := chat.GetTools(), ""
	choice := chat.GetToolChoice()
	if tools != "" && choice.GetMode() != workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE && e.ParsesToolCalls() {
		names, err := functionNames(tools)
		if err != nil {
			return nil, "", err
		}
		opts.Functions = names
		switch {
		case choice.GetFunction() != "":
			opts.Choice = choice.GetFunction()
			schema, err = outparse.NamedSchema(tools, opts.Choice)
		case choice.GetMode() == workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
			opts.Choice = outparse.ChoiceRequired
			schema, err = outparse.RequiredSchema(tools)
		}
		if err != nil {
			return nil, "", status.Errorf(codes.InvalidArgument, "prompt.messages.tool_choice: %v", err)
		}
	}
	if opts.Functions == nil && !e.ParsesReasoning() {
		return nil, "", nil
	}
	reasoning, toolCall := e.reasoning, e.toolCall
	return func() ParseFunc {
		p, _ := outparse.New(reasoning, toolCall, opts) // the names were checked at start
		return func(text string, last bool, chunk *workerv1.Chunk) (int, int) {
			d := p.Feed(text)
			if last {
				f := p.Finish()
				d.Content += f.Content
				d.Reasoning += f.Reasoning
				d.Calls = append(d.Calls, f.Calls...)
			}
			chunk.Text, chunk.ReasoningText, chunk.ToolCalls = d.Content, d.Reasoning, toolCallDeltas(d.Calls)
			return p.Calls(), p.Failures()
		}
	}, schema, nil
}

// functionNames are the names of the functions in tools, OpenAI's chat
// tools array (the router checked its shape).
func functionNames(tools string) ([]string, error) {
	var list []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(tools), &list); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "prompt.messages.tools: want OpenAI's tools array: %v", err)
	}
	names := make([]string, 0, len(list))
	for _, t := range list {
		names = append(names, t.Function.Name)
	}
	return names, nil
}

func toolCallDeltas(calls []outparse.CallPiece) []*workerv1.ToolCallDelta {
	if len(calls) == 0 {
		return nil
	}
	out := make([]*workerv1.ToolCallDelta, len(calls))
	for i, c := range calls {
		out[i] = &workerv1.ToolCallDelta{Index: uint32(c.Index), Id: c.ID, Name: c.Name, Arguments: c.Arguments}
		if c.ID != "" {
			out[i].Type = "function"
		}
	}
	return out
}

// newCallID is a call id as OpenAI's: "call_" and 26 random letters and
// digits.
func newCallID() string { return "call_" + rand.Text() }
