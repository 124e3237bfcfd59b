package router

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// responseJSON is OpenAI's Response object, with the request's settings
// echoed as OpenAI echoes them (output_text is the SDKs' own).
type responseJSON struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Background         bool            `json:"background"`
	CompletedAt        *int64          `json:"completed_at"`
	Error              *respErrorJSON  `json:"error"`
	IncompleteDetails  *incompleteJSON `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	MaxToolCalls       *int64          `json:"max_tool_calls"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	PromptCacheKey     *string         `json:"prompt_cache_key"`
	Reasoning          reasoningJSON   `json:"reasoning"`
	SafetyIdentifier   *string         `json:"safety_identifier"`
	ServiceTier        string          `json:"service_tier"`
	Store              bool            `json:"store"`
	Temperature        float32         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              []respTool      `json:"tools"`
	TopLogprobs        int             `json:"top_logprobs"`
	TopP               float32         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsageJSON  `json:"usage"`
	User               *string         `json:"user"`
	Metadata           json.RawMessage `json:"metadata"`
}

type respErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteJSON struct {
	Reason string `json:"reason"`
}

type reasoningJSON struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// outputMessage is the assistant's message item of a response.
type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is an output_text content part.
type outputText struct {
	Type        string        `json:"type"`
	Text        string        `json:"text"`
	Annotations []struct{}    `json:"annotations"`
	Logprobs    []chatLogprob `json:"logprobs"`
}

// newOutputText is the part of text, whose tokens' logprobs are lps.
func newOutputText(text string, lps []*workerv1.TokenLogprob) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: chatLogprobsOf(lps).Content}
}

// respUsageJSON is the Responses API's usage object.
type respUsageJSON struct {
	InputTokens         uint32        `json:"input_tokens"`
	InputTokensDetails  cachedJSON    `json:"input_tokens_details"`
	OutputTokens        uint32        `json:"output_tokens"`
	OutputTokensDetails reasoningUsed `json:"output_tokens_details"`
	TotalTokens         uint32        `json:"total_tokens"`
}

type cachedJSON struct {
	CachedTokens uint32 `json:"cached_tokens"`
}

type reasoningUsed struct {
	ReasoningTokens uint32 `json:"reasoning_tokens"`
}

func respUsage(u *workerv1.Usage) *respUsageJSON {
	return &respUsageJSON{InputTokens: u.GetPromptTokens(), InputTokensDetails: cachedJSON{u.GetCachedTokens()},
		OutputTokens: u.GetCompletionTokens(), OutputTokensDetails: reasoningUsed{u.GetReasoningTokens()},
		TotalTokens: u.GetPromptTokens() + u.GetCompletionTokens()}
}

// newResponse is the response to c, in progress, with no output yet.
func (c *responsesRequest) newResponse(id, model string, created int64) *responseJSON {
	r := &responseJSON{ID: id, Object: "response", CreatedAt: created, Status: "in_progress",
		Instructions: c.Instructions, MaxOutputTokens: c.MaxOutputTokens, MaxToolCalls: c.MaxToolCalls, Model: model, Output: []any{},
		ParallelToolCalls: c.ParallelToolCalls == nil || *c.ParallelToolCalls, PromptCacheKey: c.PromptCacheKey,
		SafetyIdentifier: c.SafetyIdentifier, ServiceTier: "default", Store: c.Store == nil || *c.Store,
		Temperature: 1, Text: c.textEcho(), ToolChoice: json.RawMessage(`"auto"`), Tools: c.toolsEcho, TopP: 1,
		Truncation: "disabled", User: c.User, Metadata: json.RawMessage("{}")}
	if c.Temperature != nil {
		r.Temperature = *c.Temperature
	}
	if c.TopP != nil {
		r.TopP = *c.TopP
	}
	if c.TopLogprobs != nil {
		r.TopLogprobs = int(*c.TopLogprobs)
	}
	if !isNull(c.Metadata) {
		r.Metadata = c.Metadata
	}
	if r.Tools == nil {
		r.Tools = []respTool{}
	}
	if tc := compactOrNil(c.ToolChoice); tc != nil {
		r.ToolChoice = tc
	}
	return r
}

// textEcho is the text setting as OpenAI echoes it: format text and
// verbosity medium unless the request set a format.
func (c *responsesRequest) textEcho() json.RawMessage {
	echo := map[string]json.RawMessage{"format": json.RawMessage(`{"type":"text"}`), "verbosity": json.RawMessage(`"medium"`)}
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Text, &m) == nil && !isNull(m["format"]) {
		var buf bytes.Buffer
		if json.Compact(&buf, m["format"]) == nil {
			echo["format"] = buf.Bytes()
		}
	}
	b, _ := json.Marshal(echo)
	return b
}

// finish completes r with its output, whose items o built, and the
// run's end: completed, or incomplete at max_output_tokens (the item
// then open, incomplete too). A streamed o sends its last item's events.
func (r *responseJSON) finish(o *respOutput, final *workerv1.Final) error {
	now := time.Now().Unix()
	r.CompletedAt, r.Status = &now, "completed"
	if final.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_LENGTH {
		// completed_at: "only present when the status is completed".
		r.CompletedAt, r.Status, r.IncompleteDetails = nil, "incomplete", &incompleteJSON{Reason: "max_output_tokens"}
	}
	err := o.finish(r.Status)
	r.Output = make([]any, len(o.items))
	for i, it := range o.items {
		r.Output[i] = it.view(true)
	}
	r.Usage = respUsage(final.GetUsage())
	return err
}

// responses answers POST /v1/responses: the request's messages generated
// as a chat completion's, answered as a Response object, whole or as the
// Responses API's events.
func (h *httpHandler) responses(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.proxy.refused(RefusedInvalid)
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	p, c, req, aerr := h.parseResponses(w, r)
	if aerr != nil {
		h.proxy.refused(badRefusal(aerr))
		h.fail(w, r, "", aerr)
		return
	}
	id := "resp_" + newRequestID()
	req.RequestId = id
	run := p.runs(req)[0]
	if p.stream {
		h.streamResponse(w, r, p, c, id, run)
		return
	}
	created, model := time.Now().Unix(), p.model
	o := &respOutput{}
	first := runAll(r.Context(), []*promptRun{run}, func(ctx context.Context, _ int, run *promptRun) error {
		return h.proxy.generate(ctx, run.req, run.extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
			if model == "" {
				model = ep.Model
			}
			run.collect(m)
			return o.add(m.GetChunk())
		})
	})
	if aerr := failure(first, p.names); aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	resp := c.newResponse(id, model, created)
	resp.finish(o, run.final)
	writeJSON(w, http.StatusOK, resp)
}

// The output item kinds.
const (
	kindMessage   = "message"
	kindReasoning = "reasoning"
	kindCall      = "function_call"
)

// respItem is one output item as it is built: a message, reasoning, or a
// function call.
type respItem struct {
	kind  string
	id    string // streamed: given when added; whole: when done
	index int    // output_index
	// text is the message's or reasoning's text, or the call's arguments.
	text         strings.Builder
	lps          []*workerv1.TokenLogprob
	callID, name string
	status       string
}

// callJSON is a function_call item.
type callJSON struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// reasoningItemJSON is a reasoning item: its text as reasoning_text
// content (OpenAI's and vLLM's form for a model's raw reasoning) and as
// one summary part, the one place the AI SDK reads it.
type reasoningItemJSON struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Summary []reasoningPart `json:"summary"`
	Content []reasoningPart `json:"content"`
	Status  string          `json:"status"`
}

type reasoningPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func summaryPart(text string) reasoningPart { return reasoningPart{Type: "summary_text", Text: text} }
func reasoningText(text string) reasoningPart {
	return reasoningPart{Type: "reasoning_text", Text: text}
}

// view is the item as a response (done) or response.output_item.added
// (not done: no content yet) holds it.
func (it *respItem) view(done bool) any {
	text := it.text.String()
	switch it.kind {
	case kindCall:
		if !done {
			text = ""
		}
		return callJSON{Type: kindCall, ID: it.id, CallID: it.callID, Name: it.name, Arguments: text, Status: it.status}
	case kindReasoning:
		r := reasoningItemJSON{Type: kindReasoning, ID: it.id, Summary: []reasoningPart{}, Content: []reasoningPart{}, Status: it.status}
		if done {
			r.Summary, r.Content = []reasoningPart{summaryPart(text)}, []reasoningPart{reasoningText(text)}
		}
		return r
	}
	m := outputMessage{ID: it.id, Type: kindMessage, Status: it.status, Role: "assistant", Content: []outputText{}}
	if done {
		m.Content = []outputText{newOutputText(text, it.lps)}
	}
	return m
}

// respOutput builds a response's output items from the worker's chunks,
// in the order their parts come: reasoning, message text, function
// calls, a new item each time the kind changes. Whitespace with no text
// before it is held: it starts no message (a model's newlines between
// its reasoning and a call are none), and goes in front of the text that
// follows. A streamed output (emit set) sends each item's events as it
// goes, its ids random (sent before the item exists); a whole one's ids
// carry their items (payloadID).
type respOutput struct {
	items []*respItem
	cur   *respItem
	calls map[uint32]*respItem // by ToolCallDelta.index
	held  strings.Builder
	// heldLps are the logprobs of held's tokens.
	heldLps []*workerv1.TokenLogprob
	emit    func(typ string, fields map[string]any) error
}

// add adds c, a chunk of choice 0 (nil: none) to the output.
func (o *respOutput) add(c *workerv1.Chunk) error {
	if c == nil || c.GetIndex() != 0 {
		return nil
	}
	if r := c.GetReasoningText(); r != "" {
		if err := o.reasoning(r); err != nil {
			return err
		}
	}
	// A token of no text (EOS) still brings its logprob.
	if c.GetText() != "" || len(c.GetLogprobs()) > 0 {
		if err := o.content(c.GetText(), c.GetLogprobs()); err != nil {
			return err
		}
	}
	for _, d := range c.GetToolCalls() {
		if err := o.toolCall(d); err != nil {
			return err
		}
	}
	return nil
}

func (o *respOutput) send(typ string, fields map[string]any) error {
	if o.emit == nil {
		return nil
	}
	return o.emit(typ, fields)
}

// open closes the open item and opens one of kind, sending its added
// events; the held whitespace goes with the item closed.
func (o *respOutput) open(kind, callID, name string) (*respItem, error) {
	if err := o.closeItem("completed"); err != nil {
		return nil, err
	}
	o.held.Reset()
	o.heldLps = nil
	it := &respItem{kind: kind, index: len(o.items), callID: callID, name: name, status: "in_progress"}
	if o.emit != nil {
		it.id = randomItemID(map[string]string{kindMessage: prefixMessage, kindReasoning: prefixReasoning, kindCall: prefixCall}[kind])
	}
	o.items, o.cur = append(o.items, it), it
	if err := o.send("response.output_item.added", map[string]any{"output_index": it.index, "item": it.view(false)}); err != nil {
		return nil, err
	}
	var err error
	switch kind {
	case kindMessage:
		err = o.send("response.content_part.added", it.part(map[string]any{"content_index": 0, "part": newOutputText("", nil)}))
	case kindReasoning:
		err = o.send("response.content_part.added", it.part(map[string]any{"content_index": 0, "part": reasoningText("")}))
		if err == nil {
			err = o.send("response.reasoning_summary_part.added", it.part(map[string]any{"summary_index": 0, "part": summaryPart("")}))
		}
	}
	return it, err
}

// part is fields with the item's item_id and output_index.
func (it *respItem) part(fields map[string]any) map[string]any {
	fields["item_id"], fields["output_index"] = it.id, it.index
	return fields
}

func (o *respOutput) reasoning(text string) error {
	it := o.cur
	if it == nil || it.kind != kindReasoning {
		var err error
		if it, err = o.open(kindReasoning, "", ""); err != nil {
			return err
		}
	}
	it.text.WriteString(text)
	if err := o.send("response.reasoning_text.delta", it.part(map[string]any{"content_index": 0, "delta": text})); err != nil {
		return err
	}
	return o.send("response.reasoning_summary_text.delta", it.part(map[string]any{"summary_index": 0, "delta": text}))
}

func (o *respOutput) content(text string, lps []*workerv1.TokenLogprob) error {
	it := o.cur
	if it == nil || it.kind != kindMessage {
		if strings.TrimSpace(o.held.String()+text) == "" {
			o.held.WriteString(text)
			o.heldLps = append(o.heldLps, lps...)
			return nil
		}
		text, lps = o.held.String()+text, append(o.heldLps, lps...)
		var err error
		if it, err = o.open(kindMessage, "", ""); err != nil {
			return err
		}
	}
	it.text.WriteString(text)
	it.lps = append(it.lps, lps...)
	return o.send("response.output_text.delta", it.part(map[string]any{"content_index": 0, "delta": text, "logprobs": chatLogprobsOf(lps).Content}))
}

// toolCall adds a piece of a call: its first (with its id and name)
// opens its item, later ones add to its arguments. A worker sends a
// call's pieces before the next item's.
func (o *respOutput) toolCall(d *workerv1.ToolCallDelta) error {
	it := o.calls[d.GetIndex()]
	if it == nil {
		id := d.GetId()
		if id == "" {
			id = "call_" + newRequestID()
		}
		var err error
		if it, err = o.open(kindCall, id, d.GetName()); err != nil {
			return err
		}
		if o.calls == nil {
			o.calls = map[uint32]*respItem{}
		}
		o.calls[d.GetIndex()] = it
	}
	if d.GetArguments() == "" {
		return nil
	}
	it.text.WriteString(d.GetArguments())
	if it != o.cur {
		return nil
	}
	return o.send("response.function_call_arguments.delta", it.part(map[string]any{"delta": d.GetArguments()}))
}

// finish ends the output: an answer with no item gets its message (the
// held text, maybe none), and the open item ends with status.
func (o *respOutput) finish(status string) error {
	if len(o.items) == 0 {
		text, lps := o.held.String(), o.heldLps
		it, err := o.open(kindMessage, "", "")
		if err != nil {
			return err
		}
		it.text.WriteString(text)
		it.lps = lps
		if text != "" || len(lps) > 0 {
			if err := o.send("response.output_text.delta", it.part(map[string]any{"content_index": 0, "delta": text, "logprobs": chatLogprobsOf(lps).Content})); err != nil {
				return err
			}
		}
	}
	return o.closeItem(status)
}

// closeItem ends the open item with status, sending its done events; a
// whole output's item gets the id that carries it.
func (o *respOutput) closeItem(status string) error {
	it := o.cur
	if it == nil {
		return nil
	}
	o.cur, it.status = nil, status
	text := it.text.String()
	if o.emit == nil {
		switch it.kind {
		case kindMessage:
			it.id = itemID(text)
		case kindReasoning:
			it.id = payloadID(prefixReasoning, text)
		case kindCall:
			it.id = callItemID(it.callID, it.name, text)
		}
		return nil
	}
	var events []respEvent
	switch it.kind {
	case kindMessage:
		part := newOutputText(text, it.lps)
		events = []respEvent{
			{"response.output_text.done", it.part(map[string]any{"content_index": 0, "text": text, "logprobs": part.Logprobs})},
			{"response.content_part.done", it.part(map[string]any{"content_index": 0, "part": part})}}
	case kindReasoning:
		events = []respEvent{
			{"response.reasoning_text.done", it.part(map[string]any{"content_index": 0, "text": text})},
			{"response.content_part.done", it.part(map[string]any{"content_index": 0, "part": reasoningText(text)})},
			{"response.reasoning_summary_text.done", it.part(map[string]any{"summary_index": 0, "text": text})},
			{"response.reasoning_summary_part.done", it.part(map[string]any{"summary_index": 0, "part": summaryPart(text)})}}
	case kindCall:
		events = []respEvent{{"response.function_call_arguments.done", it.part(map[string]any{"arguments": text})}}
	}
	events = append(events, respEvent{"response.output_item.done", map[string]any{"output_index": it.index, "item": it.view(true)}})
	for _, e := range events {
		if err := o.emit(e.typ, e.fields); err != nil {
			return err
		}
	}
	return nil
}

// respEvent is one event of a streamed response.
type respEvent struct {
	typ    string
	fields map[string]any
}
