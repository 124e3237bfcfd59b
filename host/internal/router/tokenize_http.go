package router

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// vLLM's tokenizer endpoints.
const (
	endpointTokenize   = "/tokenize"
	endpointDetokenize = "/detokenize"
)

// tokenizeRequest is the body of POST /tokenize: vLLM's
// TokenizeCompletionRequest (prompt) or TokenizeChatRequest (messages).
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             json.RawMessage `json:"messages"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ReturnTokenStrs      *bool           `json:"return_token_strs"`
	ContinueFinalMessage *bool           `json:"continue_final_message"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
}

// tokenizeResponse is vLLM's TokenizeResponse; token_strs is null unless
// asked for, as vLLM's.
type tokenizeResponse struct {
	Count       int       `json:"count"`
	MaxModelLen uint32    `json:"max_model_len"`
	Tokens      []uint32  `json:"tokens"`
	TokenStrs   *[]string `json:"token_strs"`
}

// detokenizeRequest is vLLM's DetokenizeRequest; detokenizeResponse its
// DetokenizeResponse.
type detokenizeRequest struct {
	Model  string    `json:"model"`
	Tokens []float64 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// tokenizeFields are the fields of vLLM's tokenizer requests; those with
// a check are taken only at their neutral value (what vigil does not
// support: continue_final_message, a request's own chat_template, tools,
// multimodal kwargs). Any other field is refused.
var tokenizeFields = map[string]func(json.RawMessage) bool{
	"model": nil, "prompt": nil, "messages": nil, "add_special_tokens": nil, "add_generation_prompt": nil,
	"return_token_strs": nil, "chat_template_kwargs": nil, "tokens": nil,
	"continue_final_message": oneOf("false"),
	"chat_template":          func(json.RawMessage) bool { return false },
	"tools":                  oneOf("[]"),
	"media_io_kwargs":        oneOf("{}"),
	"mm_processor_kwargs":    oneOf("{}"),
}

// tokenizeWhy says why a field is not taken.
var tokenizeWhy = map[string]string{
	"continue_final_message": "vigil always renders the final message closed",
	"chat_template":          "the worker renders with its own template (its vigil run's --chat-template)",
	"tools":                  "tool definitions are not rendered yet",
	"media_io_kwargs":        "vigil takes text only",
	"mm_processor_kwargs":    "vigil takes text only",
}

// checkTokenizeFields refuses, in name order, a field of body that
// endpoint (/tokenize or /detokenize) does not take.
func checkTokenizeFields(endpoint string, body map[string]json.RawMessage) *apiError {
	for _, f := range slices.Sorted(maps.Keys(body)) {
		neutral, known := tokenizeFields[f]
		// tokens is /detokenize's input, and all it has beside model.
		if !known || (f != "model" && (f == "tokens") != (endpoint == endpointDetokenize)) {
			return badRequest(f, "Unrecognized request argument supplied: %s", f)
		}
		if raw := bytes.TrimSpace(body[f]); neutral != nil && !isNull(raw) && !neutral(raw) {
			return badRequest(f, "%s: vigil cannot honour %s = %s; %s", f, f, clip(raw), tokenizeWhy[f])
		}
	}
	return nil
}

// decodeTokenizeBody reads a tokenizer request's body into v, its fields
// checked first.
func (h *httpHandler) decodeTokenizeBody(w http.ResponseWriter, r *http.Request, endpoint string, v any) *apiError {
	fields, body, aerr := h.readBody(w, r)
	if aerr != nil {
		return aerr
	}
	if aerr := checkTokenizeFields(endpoint, fields); aerr != nil {
		return aerr
	}
	return decodeBody(body, v)
}

// toWorker maps a /tokenize body onto the worker API; prompt names its
// input in errors.
func (c *tokenizeRequest) toWorker() (req *workerv1.TokenizeRequest, prompt string, aerr *apiError) {
	req = &workerv1.TokenizeRequest{Model: c.Model, AddSpecialTokens: c.AddSpecialTokens,
		ReturnTokenStrs: c.ReturnTokenStrs != nil && *c.ReturnTokenStrs}
	switch {
	case c.Prompt != nil && !isNull(c.Messages):
		return nil, "", badRequest("messages", "messages: give prompt or messages, not both")
	case c.Prompt != nil:
		if c.AddGenerationPrompt != nil {
			return nil, "", badRequest("add_generation_prompt", "add_generation_prompt: only with messages")
		}
		if !isNull(c.ChatTemplateKwargs) {
			return nil, "", badRequest("chat_template_kwargs", "chat_template_kwargs: only with messages")
		}
		req.Input = &workerv1.TokenizeRequest_Text{Text: *c.Prompt}
		return req, "prompt", nil
	case isNull(c.Messages):
		return nil, "", badRequest("prompt", "prompt: required (a string), or messages")
	}
	var g workerv1.GenerateRequest
	if aerr := setMessages(&g, c.Messages); aerr != nil {
		return nil, "", aerr
	}
	if aerr := setTemplateKwargs(g.GetMessages(), c.ChatTemplateKwargs); aerr != nil {
		return nil, "", aerr
	}
	req.Input = &workerv1.TokenizeRequest_Messages{Messages: g.GetMessages()}
	req.AddGenerationPrompt = c.AddGenerationPrompt
	return req, "messages", nil
}

// tokenize answers POST /tokenize, as vLLM's.
func (h *httpHandler) tokenize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	id := newRequestID()
	var c tokenizeRequest
	if aerr := h.decodeTokenizeBody(w, r, endpointTokenize, &c); aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	req, prompt, aerr := c.toWorker()
	if aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	resp, err := h.proxy.Tokenize(r.Context(), req)
	if err != nil {
		h.fail(w, r, id, tokenizeError(err, prompt))
		return
	}
	out := tokenizeResponse{Count: len(resp.GetTokenIds()), MaxModelLen: resp.GetMaxModelLen(),
		Tokens: append([]uint32{}, resp.GetTokenIds()...)}
	if req.GetReturnTokenStrs() {
		strs := append([]string{}, resp.GetTokenStrs()...)
		out.TokenStrs = &strs
	}
	writeJSON(w, http.StatusOK, out)
}

// detokenize answers POST /detokenize, as vLLM's.
func (h *httpHandler) detokenize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	id := newRequestID()
	var c detokenizeRequest
	if aerr := h.decodeTokenizeBody(w, r, endpointDetokenize, &c); aerr != nil {
		h.fail(w, r, id, aerr)
		return
	}
	if c.Tokens == nil {
		h.fail(w, r, id, badRequest("tokens", "tokens: required (an array of token ids)"))
		return
	}
	req := &workerv1.DetokenizeRequest{Model: c.Model, TokenIds: make([]uint32, len(c.Tokens))}
	for i, t := range c.Tokens {
		if t < 0 || t > math.MaxUint32 || t != math.Trunc(t) {
			h.fail(w, r, id, badRequest("tokens", "tokens[%d]: %v is not a token id (an integer from 0)", i, t))
			return
		}
		req.TokenIds[i] = uint32(t)
	}
	resp, err := h.proxy.Detokenize(r.Context(), req)
	if err != nil {
		h.fail(w, r, id, tokenizeError(err, "tokens"))
		return
	}
	writeJSON(w, http.StatusOK, detokenizeResponse{Prompt: resp.GetText()})
}

// tokenizeError is the OpenAI error of a failed Tokenize or Detokenize:
// no tokenizer (the router's noTokenizer, or a worker's) is 400 naming
// the model; a worker's INVALID_ARGUMENT naming its input (text,
// token_ids, input) names the request's, prompt; the rest as fromStatus.
func tokenizeError(err error, prompt string) *apiError {
	st := status.Convert(err)
	switch st.Code() {
	case codes.FailedPrecondition:
		return badRequest("model", "%s", clean(st.Message()))
	case codes.InvalidArgument:
		for _, f := range []string{"text", "token_ids", "input"} {
			if rest, ok := strings.CutPrefix(st.Message(), f+":"); ok {
				return badRequest(prompt, "%s:%s", prompt, clean(rest))
			}
		}
	}
	return fromStatus(err, fieldNames{prompt: prompt, maxTokens: "max_tokens"})
}
