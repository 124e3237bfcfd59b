package router

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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
	Output             []outputMessage `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	PromptCacheKey     *string         `json:"prompt_cache_key"`
	Reasoning          reasoningJSON   `json:"reasoning"`
	SafetyIdentifier   *string         `json:"safety_identifier"`
	ServiceTier        string          `json:"service_tier"`
	Store              bool            `json:"store"`
	Temperature        float32         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              []struct{}      `json:"tools"`
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
		OutputTokens: u.GetCompletionTokens(), TotalTokens: u.GetPromptTokens() + u.GetCompletionTokens()}
}

// newResponse is the response to c, in progress, with no output yet.
func (c *responsesRequest) newResponse(id, model string, created int64) *responseJSON {
	r := &responseJSON{ID: id, Object: "response", CreatedAt: created, Status: "in_progress",
		Instructions: c.Instructions, MaxOutputTokens: c.MaxOutputTokens, Model: model, Output: []outputMessage{},
		ParallelToolCalls: c.ParallelToolCalls == nil || *c.ParallelToolCalls, PromptCacheKey: c.PromptCacheKey,
		SafetyIdentifier: c.SafetyIdentifier, ServiceTier: "default", Store: c.Store == nil || *c.Store,
		Temperature: 1, Text: c.textEcho(), ToolChoice: "auto", Tools: []struct{}{}, TopP: 1,
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
	if !isNull(c.ToolChoice) {
		json.Unmarshal(c.ToolChoice, &r.ToolChoice)
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

// finish completes r with its message (text, its logprobs lps, id msgID)
// and the run's end: completed, or incomplete at max_output_tokens.
func (r *responseJSON) finish(msgID, text string, lps []*workerv1.TokenLogprob, final *workerv1.Final) {
	now := time.Now().Unix()
	r.CompletedAt, r.Status = &now, "completed"
	if final.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_LENGTH {
		// completed_at: "only present when the status is completed".
		r.CompletedAt, r.Status, r.IncompleteDetails = nil, "incomplete", &incompleteJSON{Reason: "max_output_tokens"}
	}
	r.Output = []outputMessage{{ID: msgID, Type: "message", Status: r.Status, Role: "assistant", Content: []outputText{newOutputText(text, lps)}}}
	r.Usage = respUsage(final.GetUsage())
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
	first := runAll(r.Context(), []*promptRun{run}, func(ctx context.Context, _ int, run *promptRun) error {
		return h.proxy.generate(ctx, run.req, run.extra, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
			if model == "" {
				model = ep.Model
			}
			run.collect(m)
			return nil
		})
	})
	if aerr := failure(first, p.names); aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	text := run.texts[0].String()
	resp := c.newResponse(id, model, created)
	resp.finish(itemID(text), text, run.lp(0), run.final)
	writeJSON(w, http.StatusOK, resp)
}

// lp is choice j's logprobs, nil when the request asked for none.
func (run *promptRun) lp(j int) []*workerv1.TokenLogprob {
	if run.lps == nil {
		return nil
	}
	return run.lps[j]
}
