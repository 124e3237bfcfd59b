package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// promptRun is one prompt's worker request and what came back of it. A
// completions batch has one per prompt; every other request has one.
type promptRun struct {
	req   *workerv1.GenerateRequest
	extra []discovery.Need // beyond needsOf(req): prompt_token_ids to echo token ids
	// echo is the text put in front of each choice (completions' echo):
	// the text prompt, or the worker's Prompt.text for token ids.
	echo   string
	echoed bool // a stream sent it
	texts  []strings.Builder
	final  *workerv1.Final
	err    error
	// With logprobs: each choice's (whole responses), the prompt's (echo),
	// and each choice's text offset so far (streams).
	lps       [][]*workerv1.TokenLogprob
	promptLps []*workerv1.TokenLogprob
	offsets   []int
	// promptOnly: the output is dropped (echo with max_tokens 0).
	promptOnly bool
	// reasoning and calls are each choice's reasoning text and tool calls
	// (issue 27): Chunk.reasoning_text and Chunk.tool_calls collected.
	reasoning []strings.Builder
	calls     [][]*callAcc
}

// callAcc is a tool call collected from its pieces (ToolCallDelta): the
// first names it, each adds to its arguments.
type callAcc struct {
	id, typ, name string
	args          strings.Builder
}

// runs are the worker requests of a parsed request whose first (or only)
// prompt's request is req: one per prompt, each asking for its prompt
// back when it must echo token ids.
func (p *parsed) runs(req *workerv1.GenerateRequest) []*promptRun {
	prompts := p.prompts
	if prompts == nil {
		prompts = []*workerv1.GenerateRequest{req}
	}
	runs := make([]*promptRun, len(prompts))
	for i, pr := range prompts {
		r := req
		if len(prompts) > 1 {
			r = proto.CloneOf(req)
			r.Prompt = pr.Prompt
			r.RequestId = fmt.Sprintf("%s-%d", req.GetRequestId(), i)
		}
		run := &promptRun{req: r, texts: make([]strings.Builder, p.n), promptOnly: p.promptOnly,
			reasoning: make([]strings.Builder, p.n), calls: make([][]*callAcc, p.n)}
		if p.logprobs {
			run.lps, run.offsets = make([][]*workerv1.TokenLogprob, p.n), make([]int, p.n)
		}
		if p.echo {
			if r.GetTokenIds() != nil {
				r.ReturnPrompt = true
				run.extra = []discovery.Need{{Name: discovery.CapPromptTokenIDs}}
			}
			run.echo = r.GetText()
		}
		runs[i] = run
	}
	return runs
}

// runAll runs f for each run, at once for a batch (batchParallel at a
// time), and returns the run that failed first (failed), whose failure
// cancelled the others; nil when none did.
func runAll(ctx context.Context, runs []*promptRun, f func(ctx context.Context, i int, run *promptRun) error) *promptRun {
	if len(runs) == 1 {
		runs[0].err = f(ctx, 0, runs[0])
		if runs[0].failed() {
			return runs[0]
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first *promptRun
	)
	slots := make(chan struct{}, batchParallel)
	for i, run := range runs {
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				run.err = f(ctx, i, run)
			case <-ctx.Done():
				run.err = status.FromContextError(ctx.Err()).Err()
			}
			if run.failed() {
				once.Do(func() { first = run; cancel() })
			}
		})
	}
	wg.Wait()
	return first
}

// batchParallel is how many prompts of a batch run at once: enough to
// spread a batch over a fleet, few enough that a large batch does not
// fill every worker's --max-inflight at once.
const batchParallel = 16

// failed reports whether the run did not complete: no final message, or
// one (or one of its choices) ending with ERROR or CANCELLED.
func (run *promptRun) failed() bool {
	if _, failed := finishReason(run.final.GetFinishReason()); run.final == nil || failed {
		return true
	}
	for _, c := range run.final.GetChoices() {
		if _, failed := finishReason(c.GetFinishReason()); failed {
			return true
		}
	}
	return false
}

// failure is the error of a request whose run first failed (runAll);
// nil when none did. A run whose final is fine failed in one of its
// choices: that choice's end is the error.
func failure(first *promptRun, names fieldNames) *apiError {
	if first == nil {
		return nil
	}
	final := first.final
	if _, failed := finishReason(final.GetFinishReason()); final != nil && !failed {
		for _, c := range final.GetChoices() {
			if _, failed := finishReason(c.GetFinishReason()); failed {
				final = &workerv1.Final{FinishReason: c.GetFinishReason(), Description: c.GetDescription()}
				break
			}
		}
	}
	return generationError(first.err, final, names)
}

// collect adds m, a message of the run's stream, to the run.
func (run *promptRun) collect(m *workerv1.GenerateResponse) {
	switch k := m.GetKind().(type) {
	case *workerv1.GenerateResponse_Prompt:
		if run.req.GetReturnPrompt() || run.req.GetLogprobs().GetPrompt() {
			run.echo = k.Prompt.GetText()
		}
		run.promptLps = k.Prompt.GetLogprobs()
	case *workerv1.GenerateResponse_Chunk:
		if i := int(k.Chunk.GetIndex()); i < len(run.texts) && !run.promptOnly {
			run.texts[i].WriteString(k.Chunk.GetText())
			run.reasoning[i].WriteString(k.Chunk.GetReasoningText())
			run.addCalls(i, k.Chunk.GetToolCalls())
			if run.lps != nil {
				run.lps[i] = append(run.lps[i], k.Chunk.GetLogprobs()...)
			}
		}
	case *workerv1.GenerateResponse_Final:
		run.final = k.Final
	}
}

// addCalls adds the pieces of tool calls of choice j. A piece of a call
// after the last known starts the next one (the worker numbers them
// from 0 in order), so no index makes a gap.
func (run *promptRun) addCalls(j int, pieces []*workerv1.ToolCallDelta) {
	for _, d := range pieces {
		calls := run.calls[j]
		at := min(int(d.GetIndex()), len(calls))
		if at == len(calls) {
			calls = append(calls, &callAcc{})
			run.calls[j] = calls
		}
		c := calls[at]
		if d.GetId() != "" {
			c.id = d.GetId()
		}
		if d.GetType() != "" {
			c.typ = d.GetType()
		}
		if d.GetName() != "" {
			c.name = d.GetName()
		}
		c.args.WriteString(d.GetArguments())
	}
}

// toolCalls are choice j's tool calls, whole: for chat's message and the
// Responses API's function_call items.
func (run *promptRun) toolCalls(j int) []*workerv1.ToolCall {
	var out []*workerv1.ToolCall
	for _, c := range run.calls[j] {
		typ := c.typ
		if typ == "" {
			typ = "function"
		}
		out = append(out, &workerv1.ToolCall{Id: c.id, Type: typ, Name: c.name, Arguments: c.args.String()})
	}
	return out
}

// choiceReason is OpenAI's finish reason of choice j of the run: its
// entry in Final.choices, else the final's own.
func (run *promptRun) choiceReason(j int) *string {
	for _, c := range run.final.GetChoices() {
		if int(c.GetIndex()) == j {
			r, _ := finishReason(c.GetFinishReason())
			return r
		}
	}
	r, _ := finishReason(run.final.GetFinishReason())
	return r
}

// usageJSON is OpenAI's usage object.
type usageJSON struct {
	PromptTokens        uint32            `json:"prompt_tokens"`
	CompletionTokens    uint32            `json:"completion_tokens"`
	TotalTokens         uint32            `json:"total_tokens"`
	PromptTokensDetails *promptTokensJSON `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails is sent when a worker reports reasoning
	// tokens (its reasoning parser counts them).
	CompletionTokensDetails *completionTokensJSON `json:"completion_tokens_details,omitempty"`
}

// completionTokensJSON is OpenAI's completion_tokens_details.
type completionTokensJSON struct {
	ReasoningTokens uint32 `json:"reasoning_tokens"`
}

// promptTokensJSON is OpenAI's prompt_tokens_details, sent when a worker
// reports prompt tokens served from its engine's prefix cache.
type promptTokensJSON struct {
	CachedTokens uint32 `json:"cached_tokens"`
}

// usageOf sums the runs' usage: each prompt's tokens once, as OpenAI
// and vLLM count a batch.
func usageOf(runs []*promptRun) *usageJSON {
	u := &usageJSON{}
	var cached, reasoning uint32
	for _, run := range runs {
		wu := run.final.GetUsage()
		u.PromptTokens += wu.GetPromptTokens()
		u.CompletionTokens += wu.GetCompletionTokens()
		cached += wu.GetCachedTokens()
		reasoning += wu.GetReasoningTokens()
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if cached > 0 {
		u.PromptTokensDetails = &promptTokensJSON{CachedTokens: cached}
	}
	if reasoning > 0 {
		u.CompletionTokensDetails = &completionTokensJSON{ReasoningTokens: reasoning}
	}
	return u
}

// response is a whole response body.
type response struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []any      `json:"choices"`
	Usage   *usageJSON `json:"usage"`
}

// textChoice is a choice of /v1/completions, whole or streamed.
type textChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"` // nil, *completionLogprobs
	FinishReason *string `json:"finish_reason"`
}

// chatChoice is a choice of /v1/chat/completions: Message in a whole
// response, Delta in a stream's event.
type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"` // nil, *chatLogprobs
	FinishReason *string      `json:"finish_reason"`
}

// chatMessage is the assistant's whole message: content null when it
// made tool calls and said nothing (as OpenAI and vLLM answer), its
// reasoning as vLLM gives it, under reasoning_content (LangChain's
// @langchain/openai reads it) and vLLM 0.11's newer reasoning.
type chatMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Reasoning        string         `json:"reasoning,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
}

// toolCallJSON is a whole tool call, OpenAI's
// {id, type: "function", function: {name, arguments}}.
type toolCallJSON struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionJSON `json:"function"`
}

// functionJSON is a call's function: its name (absent in a stream's
// later pieces) and its arguments, JSON text (a piece of it in a stream).
type functionJSON struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chatMessageOf is choice j's message.
func (run *promptRun) chatMessageOf(j int) *chatMessage {
	text := run.texts[j].String()
	m := &chatMessage{Role: "assistant", Content: &text, ReasoningContent: run.reasoning[j].String()}
	m.Reasoning = m.ReasoningContent
	for _, c := range run.toolCalls(j) {
		m.ToolCalls = append(m.ToolCalls, toolCallJSON{ID: c.GetId(), Type: c.GetType(), Function: functionJSON{Name: c.GetName(), Arguments: c.GetArguments()}})
	}
	if text == "" && len(m.ToolCalls) > 0 {
		m.Content = nil
	}
	return m
}

// choices are a whole response's choices, prompt i's choice j at index
// i*n+j, as OpenAI numbers them.
func (p *parsed) choices(runs []*promptRun) []any {
	choices := make([]any, 0, len(runs)*p.n)
	for i, run := range runs {
		for j := range p.n {
			index, text, reason := i*p.n+j, run.texts[j].String(), run.choiceReason(j)
			if p.endpoint == endpointChat {
				c := chatChoice{Index: index, Message: run.chatMessageOf(j), FinishReason: reason}
				if p.logprobs {
					c.Logprobs = chatLogprobsOf(run.lps[j])
				}
				choices = append(choices, c)
				continue
			}
			if p.echo {
				text = run.echo + text
			}
			c := textChoice{Index: index, Text: text, FinishReason: reason}
			if p.logprobs {
				c.Logprobs = run.completionLogprobs(j, p.promptLogprobs)
			}
			choices = append(choices, c)
		}
	}
	return choices
}

// completionLogprobs is choice j's logprobs in a whole completions
// response: with prompt (echo), the prompt's positions first.
func (run *promptRun) completionLogprobs(j int, prompt bool) *completionLogprobs {
	c, offset := newCompletionLogprobs(), 0
	if prompt {
		c.add(run.promptLps, &offset, true)
	}
	c.add(run.lps[j], &offset, false)
	return c
}

// generate answers POST /v1/completions and /v1/chat/completions.
func (h *httpHandler) generate(w http.ResponseWriter, r *http.Request, endpoint string) {
	if r.Method != http.MethodPost {
		h.proxy.refused(RefusedInvalid)
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	p, req, aerr := h.parse(w, r, endpoint)
	if aerr != nil {
		h.proxy.refused(badRefusal(aerr))
		h.fail(w, r, "", aerr)
		return
	}
	id := "cmpl-" + newRequestID()
	if endpoint == endpointChat {
		id = "chat" + id
	}
	req.RequestId = id
	runs := p.runs(req)
	if p.stream {
		h.stream(w, r, p, id, runs)
		return
	}
	var mu sync.Mutex
	model := p.model
	created := time.Now().Unix()
	first := runAll(r.Context(), runs, func(ctx context.Context, _ int, run *promptRun) error {
		return h.proxy.generate(ctx, run.req, run.extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
			mu.Lock()
			if model == "" {
				model = ep.Model
			}
			mu.Unlock()
			run.collect(m)
			return nil
		})
	})
	if aerr := failure(first, p.names); aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	for _, run := range runs {
		if run.err != nil {
			h.log.Debug("worker stream ended with an error after its final message", "request_id", run.req.GetRequestId(), "error", run.err)
		}
	}
	resp := response{ID: id, Object: "text_completion", Created: created, Model: model, Choices: p.choices(runs), Usage: usageOf(runs)}
	if endpoint == endpointChat {
		resp.Object = "chat.completion"
	}
	writeJSON(w, http.StatusOK, resp)
}
