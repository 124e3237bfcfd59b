package router

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// stream answers with server-sent events: one per chunk, its choice's
// index in it (for chat, one event per choice first gives the role; for
// completions' echo, each choice's first text is its prompt), then one
// with each choice's finish reason, one with the usage alone when asked
// (stream_options.include_usage), then [DONE]. The prompts of a batch run
// at once, their events interleaved. The status line is sent with the
// first message, or with the first heartbeat when none came within
// HTTPConfig.StreamHeartbeat, so a request that fails before either gets
// a proper error status; a failure after it is an error event and no
// [DONE].
func (h *httpHandler) stream(w http.ResponseWriter, r *http.Request, p *parsed, id string, runs []*promptRun) {
	events := newSSE(w)
	ch := &chunks{id: id, created: time.Now().Unix(), model: p.model,
		chat: p.endpoint == endpointChat, includeUsage: p.includeUsage, n: p.n, echo: p.echo, logprobs: p.logprobs}
	hb := h.startHeartbeat(events, id)
	var (
		mu      sync.Mutex // the events' writer
		started bool
	)
	first := runAll(r.Context(), runs, func(ctx context.Context, i int, run *promptRun) error {
		return h.proxy.generate(ctx, run.req, run.extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
			mu.Lock()
			defer mu.Unlock()
			if !started {
				started = true
				if ch.model == "" {
					ch.model = ep.Model
				}
				if !hb.stop() {
					events.begin()
				}
				if err := ch.roles(events); err != nil {
					return err
				}
			}
			return ch.relay(events, i, run, m)
		})
	})
	committed := hb.stop()
	aerr := failure(first, p.names)
	if !started && !committed {
		h.fail(w, r, id, aerr)
		return
	}
	if aerr != nil {
		h.streamFailed(events, r, id, aerr, started)
		return
	}
	ch.end(events, runs)
}

// chunkJSON is one event of a stream. Usage is absent unless the client
// asked for it (stream_options.include_usage); then it is null in every
// event but the last, which carries it alone, with no choices.
type chunkJSON struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []any           `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

var jsonNull = json.RawMessage("null")

// chunks makes one stream's events, each naming the request, its creation
// time and the model (the worker's, when the request named none).
type chunks struct {
	id           string
	created      int64
	model        string
	chat         bool
	includeUsage bool
	n            int  // choices per prompt
	echo         bool // completions' echo
	logprobs     bool // chunks carry logprobs
}

// event is one chunk with choices; usage is null in every chunk but the
// last when the client asked for it, absent otherwise.
func (c *chunks) event(choices []any, usage json.RawMessage) chunkJSON {
	e := chunkJSON{ID: c.id, Object: "text_completion", Created: c.created, Model: c.model, Choices: choices, Usage: usage}
	if c.chat {
		e.Object = "chat.completion.chunk"
	}
	if usage == nil && c.includeUsage {
		e.Usage = jsonNull
	}
	return e
}

// choice is a chunk's one choice, of that index: a delta for chat, text
// for completions; lp its logprobs (nil: none).
func (c *chunks) choice(index int, text *string, role string, reason *string, lp any) []any {
	if c.chat {
		return []any{chatChoice{Index: index, Delta: &chatDelta{Role: role, Content: text}, FinishReason: reason, Logprobs: lp}}
	}
	var t string
	if text != nil {
		t = *text
	}
	return []any{textChoice{Index: index, Text: t, FinishReason: reason, Logprobs: lp}}
}

// chunkLogprobs are the logprobs of a chunk of choice j of run, lps its
// positions; nil without logprobs.
func (c *chunks) chunkLogprobs(run *promptRun, j int, lps []*workerv1.TokenLogprob, prompt bool) any {
	if !c.logprobs {
		return nil
	}
	if c.chat {
		return chatLogprobsOf(lps)
	}
	l := newCompletionLogprobs()
	l.add(lps, &run.offsets[j], prompt)
	return l
}

// roles sends chat's first events: each choice's role, with empty content,
// as OpenAI's first event gives it.
func (c *chunks) roles(events sse) error {
	if !c.chat {
		return nil
	}
	for j := range c.n {
		if err := events.send(c.event(c.choice(j, new(""), "assistant", nil, nil), nil)); err != nil {
			return err
		}
	}
	return nil
}

// relay sends the events of m, a message of prompt i's run.
func (c *chunks) relay(events sse, i int, run *promptRun, m *workerv1.GenerateResponse) error {
	switch k := m.GetKind().(type) {
	case *workerv1.GenerateResponse_Prompt:
		run.collect(m)
	case *workerv1.GenerateResponse_Chunk:
		if err := c.echoOnce(events, i, run); err != nil {
			return err
		}
		j := int(k.Chunk.GetIndex())
		if j >= c.n || run.promptOnly {
			return nil // not a choice of the request, or dropped
		}
		lp := c.chunkLogprobs(run, j, k.Chunk.GetLogprobs(), false)
		return c.sendChunk(events, i*c.n+j, k.Chunk, lp)
	case *workerv1.GenerateResponse_Final:
		run.final = k.Final
	}
	return c.echoOnce(events, i, run)
}

// chatDelta is a part of the assistant's message in a stream's event:
// the role in the first event only, then one part an event (content,
// reasoning under both of chatMessage's names, or a piece of a tool
// call), nothing in the last.
type chatDelta struct {
	Role             string              `json:"role,omitempty"`
	Content          *string             `json:"content,omitempty"`
	ReasoningContent string              `json:"reasoning_content,omitempty"`
	Reasoning        string              `json:"reasoning,omitempty"`
	ToolCalls        []toolCallDeltaJSON `json:"tool_calls,omitempty"`
}

// toolCallDeltaJSON is a piece of a tool call in delta.tool_calls,
// index its place among the choice's calls: the first with id, type and
// name (arguments ""), the others a piece of its arguments alone.
type toolCallDeltaJSON struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionJSON `json:"function"`
}

// sendChunk sends the events of ck for the choice at index. A chat chunk
// with reasoning or tool calls sends its reasoning, its text and each
// piece of its calls in their own events, in that order (the worker's:
// reasoning comes before the answer, text before a call), the logprobs
// with the text; otherwise the chunk is one event of its text.
func (c *chunks) sendChunk(events sse, index int, ck *workerv1.Chunk, lp any) error {
	text := ck.GetText()
	if !c.chat || (ck.GetReasoningText() == "" && len(ck.GetToolCalls()) == 0) {
		return events.send(c.event(c.choice(index, &text, "", nil, lp), nil))
	}
	var deltas []*chatDelta
	if r := ck.GetReasoningText(); r != "" {
		deltas = append(deltas, &chatDelta{ReasoningContent: r, Reasoning: r})
	}
	lpAt := 0
	if text != "" {
		lpAt = len(deltas)
		deltas = append(deltas, &chatDelta{Content: &text})
	}
	for _, d := range ck.GetToolCalls() {
		for _, tc := range callPieces(d) {
			deltas = append(deltas, &chatDelta{ToolCalls: []toolCallDeltaJSON{tc}})
		}
	}
	if len(deltas) == 0 {
		return events.send(c.event(c.choice(index, &text, "", nil, lp), nil))
	}
	for k, d := range deltas {
		var l any
		if k == lpAt {
			l = lp
		}
		if err := events.send(c.event([]any{chatChoice{Index: index, Delta: d, Logprobs: l}}, nil)); err != nil {
			return err
		}
	}
	return nil
}

// callPieces are the delta.tool_calls pieces of d, as vLLM streams a
// call: the one that names it (with arguments ""), then one with its
// arguments; none for an empty piece.
func callPieces(d *workerv1.ToolCallDelta) []toolCallDeltaJSON {
	var out []toolCallDeltaJSON
	at := int(d.GetIndex())
	if d.GetId() != "" || d.GetName() != "" {
		typ := d.GetType()
		if typ == "" {
			typ = "function"
		}
		out = append(out, toolCallDeltaJSON{Index: at, ID: d.GetId(), Type: typ, Function: functionJSON{Name: d.GetName()}})
	}
	if d.GetArguments() != "" {
		out = append(out, toolCallDeltaJSON{Index: at, Function: functionJSON{Arguments: d.GetArguments()}})
	}
	return out
}

// echoOnce sends, with echo, the prompt as the first text of each of
// prompt i's choices, once.
func (c *chunks) echoOnce(events sse, i int, run *promptRun) error {
	if !c.echo || run.echoed {
		return nil
	}
	run.echoed = true
	if run.echo == "" {
		return nil
	}
	for j := range c.n {
		var lp any
		if run.req.GetLogprobs().GetPrompt() {
			lp = c.chunkLogprobs(run, j, run.promptLps, true)
		}
		if err := events.send(c.event(c.choice(i*c.n+j, new(run.echo), "", nil, lp), nil)); err != nil {
			return err
		}
	}
	return nil
}

// end sends each choice's finish reason, the usage when asked, and
// [DONE]; a failed send (the client is gone) ends it early.
func (c *chunks) end(events sse, runs []*promptRun) {
	for i, run := range runs {
		for j := range c.n {
			if events.send(c.event(c.choice(i*c.n+j, nil, "", run.choiceReason(j), nil), nil)) != nil {
				return
			}
		}
	}
	if c.includeUsage {
		u, _ := json.Marshal(usageOf(runs))
		if events.send(c.event([]any{}, u)) != nil {
			return
		}
	}
	events.done()
}
