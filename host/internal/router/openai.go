package router

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxBodyBytes bounds a request body: 1 MiB holds a prompt of a few
// hundred thousand characters or token ids, far beyond any model's context,
// while keeping a careless client from filling memory.
const DefaultMaxBodyBytes = 1 << 20

// RetryAfter is the Retry-After of every 503: a model whose workers are
// all away (asleep, restarting, draining) or a request every worker
// refused. OpenAI's clients wait that long before their next try.
const RetryAfter = 5 * time.Second

// RetryAfterBusy is the Retry-After of every 429: every worker tried was
// at its --max-inflight, which frees up as soon as one request ends.
const RetryAfterBusy = time.Second

// DefaultStreamHeartbeat is how long a streamed request waits for its first
// token before the router commits 200 text/event-stream and sends an SSE
// comment (HTTPConfig.StreamHeartbeat, vigil route --stream-heartbeat), and
// then the interval of those comments until the first token: well under
// nginx's 60 s proxy_read_timeout and the 100 s of an AWS ALB's or
// Cloudflare's, the read timeouts that end a long queue or prefill in
// 504/524 when nothing comes.
const DefaultStreamHeartbeat = 15 * time.Second

// heartbeatComment is the SSE comment of a heartbeat; SSE clients (the
// openai packages, EventSource) ignore comments.
const heartbeatComment = ": keepalive\n\n"

// defaultMaxTokens is OpenAI's default for max_tokens in completions.
const defaultMaxTokens = 16

// HTTPConfig configures the OpenAI-compatible handler.
type HTTPConfig struct {
	// MaxBodyBytes bounds a request body; a larger one gets 413. 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// APIKey, if not empty, is the Bearer token every request but GET
	// /health must carry (Authorization: Bearer KEY), as vLLM's --api-key;
	// a request without it or with another gets 401 (see requireKey).
	APIKey string
	// StreamHeartbeat, if not 0, is how long a streamed request waits for
	// its first message before the response is committed (200
	// text/event-stream) and an SSE comment is sent, and then the interval
	// of those comments until the first message. A failure after the
	// commit is an error event, as one after the first token.
	StreamHeartbeat time.Duration
	// Logger receives a line per failed request; nil discards.
	Logger hclog.Logger
}

// NewHTTPHandler returns the OpenAI-compatible HTTP API over p:
//
//   - POST /v1/completions: a completion, whole or streamed as server-sent
//     events (OpenAI's legacy completions API, with top_k, ignore_eos and
//     stop_token_ids as extensions).
//   - POST /v1/chat/completions: a chat completion, whole or streamed,
//     sent as a messages prompt to workers with a chat template
//     (Registration.Chat) only.
//   - GET /v1/models and GET /v1/models/{id}: the served models of the
//     current workers, what can be served now, with max_model_len when
//     their workers publish it; a model remembered while its workers are
//     away is not listed (its requests get 503).
//   - GET /health: 200 while the router can route (Pool.Serving: at least
//     one worker), else 503; the gRPC health service says the same.
//
// A request field vigil cannot honour gets 400 naming it, unless it holds
// the neutral value clients send (n 1, logprobs false, presence_penalty 0,
// logit_bias {}, ...; see params.go); so does a field OpenAI's API does not
// have. Errors have OpenAI's body, {"error":{"message","type","param","code"}},
// with OpenAI's field names; every 503 carries Retry-After (RetryAfter) and
// every 429 too (RetryAfterBusy). With cfg.APIKey, every path but /health
// needs the key first.
func NewHTTPHandler(p *Proxy, cfg HTTPConfig) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &httpHandler{proxy: p, cfg: cfg, log: orNull(cfg.Logger)}
	mux := http.NewServeMux()
	mux.HandleFunc(endpointCompletions, func(w http.ResponseWriter, r *http.Request) { h.generate(w, r, endpointCompletions) })
	mux.HandleFunc(endpointChat, func(w http.ResponseWriter, r *http.Request) { h.generate(w, r, endpointChat) })
	mux.HandleFunc("/v1/models", h.models)
	mux.HandleFunc("/health", h.health)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "not_found_error",
			msg: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	// GET /v1/models/{id} before the mux, which would redirect an id that
	// is a path ("/models/llama", TensorRT-LLM's) to a cleaned URL.
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/models/") {
			h.model(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	if cfg.APIKey == "" {
		return handler
	}
	return requireKey(cfg.APIKey, func() { p.refused(RefusedUnauthorized) }, handler)
}

type httpHandler struct {
	proxy *Proxy
	cfg   HTTPConfig
	log   hclog.Logger
}

// apiError is an OpenAI error response.
type apiError struct {
	status int
	typ    string // invalid_request_error, not_found_error, rate_limit_error, server_error
	msg    string
	param  string // the offending request field, if known
	code   string // OpenAI's error code, if any (invalid_api_key, model_not_found, context_length_exceeded)
	// retryAfter, if not 0, is sent as Retry-After.
	retryAfter time.Duration
	// cause is the worker's own words when msg replaces them, for the log.
	cause string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...), param: param}
}

// modelNotFound is OpenAI's answer for a model it does not have.
func modelNotFound(model string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		msg: fmt.Sprintf("The model `%s` does not exist.", model)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorDetail{Message: e.msg, Type: e.typ}}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.retryAfter/time.Second)))
	}
	writeJSON(w, e.status, e.body())
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
		msg: fmt.Sprintf("%s %s: method not allowed (want %s)", r.Method, r.URL.Path, allow)})
}

func (h *httpHandler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	serving, n := h.proxy.pool.Ready()
	if h.proxy.stopping.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "stopping", "workers": n})
		return
	}
	if !serving {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "no workers", "workers": n})
		return
	}
	if reason := h.proxy.pool.tlsFailing(); reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "tls failing", "workers": n, "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "workers": n})
}

// modelJSON is OpenAI's model object, with vLLM's max_model_len.
type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is absent when no worker of the model publishes it.
	MaxModelLen uint32 `json:"max_model_len,omitempty"`
}

func toModelJSON(m ModelInfo) modelJSON {
	return modelJSON{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "vigil", MaxModelLen: m.MaxModelLen}
}

func (h *httpHandler) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	data := []modelJSON{}
	for _, m := range h.proxy.pool.ModelInfos() {
		data = append(data, toModelJSON(m))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// model answers GET /v1/models/{id}; the id is the rest of the path, as
// served model names often hold a slash (org/name).
func (h *httpHandler) model(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	id, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/v1/models/"))
	if err != nil {
		id = strings.TrimPrefix(r.URL.Path, "/v1/models/")
	}
	for _, m := range h.proxy.pool.ModelInfos() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, toModelJSON(m))
			return
		}
	}
	writeError(w, modelNotFound(id))
}

// request is the body of POST /v1/completions and /v1/chat/completions,
// the fields the router maps onto the worker API; checkParams has vetted
// the rest. Pointers tell an absent (or null) field from a zero one.
type request struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float32        `json:"temperature"`
	TopP                *float32        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	StopTokenIDs        []int64         `json:"stop_token_ids"`
	N                   *int64          `json:"n"`
	Stream              *bool           `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	IgnoreEOS           *bool           `json:"ignore_eos"`
	MinTokens           *int64          `json:"min_tokens"`
	MinP                *float64        `json:"min_p"`
}

// parsed is a checked request: what the response needs of it, and the
// names its fields go by in errors.
type parsed struct {
	endpoint     string
	model        string
	stream       bool
	includeUsage bool
	names        fieldNames
}

// fieldNames are the request's own names for the worker API's prompt and
// max_tokens, which errors use.
type fieldNames struct {
	prompt    string // prompt or messages
	maxTokens string // max_tokens or max_completion_tokens
}

// readBody reads a request body within the limit, as a JSON object.
func (h *httpHandler) readBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, []byte, *apiError) {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
		msg: fmt.Sprintf("request body exceeds %d bytes, the router's --max-body-bytes", h.cfg.MaxBodyBytes)}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return nil, nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, nil, tooLarge
		}
		return nil, nil, badRequest("", "reading request body: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, nil, badRequest("", "request body must be a JSON object")
		}
		return nil, nil, badRequest("", "request body is not valid JSON: %v", err)
	}
	if fields == nil {
		return nil, nil, badRequest("", "request body must be a JSON object")
	}
	return fields, body, nil
}

// parse reads and checks a request to endpoint and maps it to the worker
// API. Fields are checked in a fixed order: a request with several bad
// fields is always told of the same one.
func (h *httpHandler) parse(w http.ResponseWriter, r *http.Request, endpoint string) (*parsed, *workerv1.GenerateRequest, *apiError) {
	fields, body, aerr := h.readBody(w, r)
	if aerr != nil {
		return nil, nil, aerr
	}
	if aerr := checkParams(endpoint, fields); aerr != nil {
		return nil, nil, aerr
	}
	var c request
	if err := json.Unmarshal(body, &c); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return nil, nil, badRequest(te.Field, "%s: want %s, got a JSON %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return nil, nil, badRequest("", "request body is not valid JSON: %v", err)
	}
	p := &parsed{endpoint: endpoint, model: c.Model, stream: c.Stream != nil && *c.Stream,
		names: fieldNames{prompt: "prompt", maxTokens: "max_tokens"}}
	req := &workerv1.GenerateRequest{
		Model:    c.Model,
		Sampling: &workerv1.Sampling{Temperature: c.Temperature, TopP: c.TopP, Seed: c.Seed},
		Stopping: &workerv1.Stopping{IgnoreEos: c.IgnoreEOS != nil && *c.IgnoreEOS},
	}
	if aerr := c.setInput(endpoint, req, &p.names); aerr != nil {
		return nil, nil, aerr
	}
	if aerr := c.setLengths(endpoint, req.Stopping, &p.names); aerr != nil {
		return nil, nil, aerr
	}
	if aerr := c.setSampling(req.Sampling); aerr != nil {
		return nil, nil, aerr
	}
	if aerr := c.setStops(req.Stopping); aerr != nil {
		return nil, nil, aerr
	}
	if aerr := c.setStreamOptions(p); aerr != nil {
		return nil, nil, aerr
	}
	return p, req, nil
}

// setInput maps the prompt (completions) or the messages (chat) onto req,
// with completions' default max_tokens.
func (c *request) setInput(endpoint string, req *workerv1.GenerateRequest, names *fieldNames) *apiError {
	if endpoint == endpointChat {
		names.prompt = "messages"
		return setMessages(req, c.Messages)
	}
	// OpenAI's legacy default; chat's is the rest of the context, which
	// the worker (or its engine) knows.
	req.Stopping.MaxTokens = defaultMaxTokens
	return setPrompt(req, c.Prompt)
}

// setLengths checks n and maps the lengths onto s: max_tokens (chat's
// max_completion_tokens first) and vLLM's min_tokens, which max_tokens
// bounds, the default one too.
func (c *request) setLengths(endpoint string, s *workerv1.Stopping, names *fieldNames) *apiError {
	if c.N != nil && *c.N != 1 {
		return badRequest("n", "n: only n=1 is supported, got %d", *c.N)
	}
	maxTokens := c.MaxTokens
	if endpoint == endpointChat && c.MaxCompletionTokens != nil {
		maxTokens, names.maxTokens = c.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > maxUint32 {
			return badRequest(names.maxTokens, "%s: want an integer from 1 to %d, got %d", names.maxTokens, uint32(maxUint32), *maxTokens)
		}
		s.MaxTokens = uint32(*maxTokens)
	}
	if c.MinTokens != nil {
		switch mt, limit := *c.MinTokens, s.MaxTokens; {
		case mt < 0 || mt > maxUint32:
			return badRequest("min_tokens", "min_tokens: want an integer from 0 to %d, got %d", uint32(maxUint32), mt)
		case limit > 0 && mt > int64(limit):
			return badRequest("min_tokens", "min_tokens: %d exceeds %s %d; want at most %s", mt, names.maxTokens, limit, names.maxTokens)
		}
		s.MinTokens = uint32(*c.MinTokens)
	}
	return nil
}

// setSampling maps min_p and top_k, whose JSON ranges are wider than the
// worker API's, onto s.
func (c *request) setSampling(s *workerv1.Sampling) *apiError {
	if c.MinP != nil {
		if mp := *c.MinP; !(mp >= 0 && mp <= 1) {
			return badRequest("min_p", "min_p: want a number from 0 to 1, got %g", mp)
		}
		s.MinP = float32(*c.MinP)
	}
	if c.TopK != nil {
		// -1 is the customary "all tokens" (vLLM's); the worker API says 0.
		switch k := *c.TopK; {
		case k == -1:
			s.TopK = new(uint32)
		case k < -1 || k > maxUint32:
			return badRequest("top_k", "top_k: want -1 or 0 (all tokens) or a positive integer, got %d", k)
		default:
			s.TopK = new(uint32(k))
		}
	}
	return nil
}

// setStops maps stop_token_ids and stop onto s.
func (c *request) setStops(s *workerv1.Stopping) *apiError {
	for _, id := range c.StopTokenIDs {
		if id < 0 || id > maxUint32 {
			return badRequest("stop_token_ids", "stop_token_ids: want token ids (integers from 0 to %d), got %d", uint32(maxUint32), id)
		}
		s.StopTokenIds = append(s.StopTokenIds, uint32(id))
	}
	stop, serr := parseStop(c.Stop)
	if serr != nil {
		return serr
	}
	s.Stop = stop
	return nil
}

// setStreamOptions reads stream_options, allowed with stream only, into
// p.includeUsage.
func (c *request) setStreamOptions(p *parsed) *apiError {
	if isNull(c.StreamOptions) {
		return nil
	}
	if !p.stream {
		return badRequest("stream_options", "stream_options: only allowed when stream is true")
	}
	var opts map[string]json.RawMessage
	if json.Unmarshal(c.StreamOptions, &opts) != nil {
		return badRequest("stream_options", "stream_options: want an object such as {\"include_usage\": true}")
	}
	for k, v := range opts {
		switch {
		case k == "include_usage":
			if json.Unmarshal(v, &p.includeUsage) != nil && !isNull(v) {
				return badRequest("stream_options", "stream_options.include_usage: want a boolean, got %s", clip(v))
			}
		case k == "continuous_usage_stats" && (isNull(v) || oneOf("false")(v)):
		default:
			return badRequest("stream_options", "stream_options.%s: vigil takes include_usage only", k)
		}
	}
	return nil
}

const maxUint32 = 1<<32 - 1

// jsonKind names the JSON value a Go type takes, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}

// setPrompt sets a string prompt as text and an array of integers as token
// ids; anything else (an array of strings, nested arrays) is refused, and so
// is an empty prompt, which no engine can complete.
func setPrompt(req *workerv1.GenerateRequest, raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return badRequest("prompt", "prompt: required")
	}
	bad := badRequest("prompt", "prompt: want a string or an array of token ids (integers from 0 to %d); "+
		"arrays of strings and nested arrays (batches) are not supported", uint32(maxUint32))
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return bad
		}
		if s == "" {
			return badRequest("prompt", "prompt: must not be empty")
		}
		req.Prompt = &workerv1.GenerateRequest_Text{Text: s}
		return nil
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return bad
		}
		if len(elems) == 0 {
			return badRequest("prompt", "prompt: must not be empty")
		}
		ids := make([]uint32, len(elems))
		for i, e := range elems {
			id, err := strconv.ParseUint(string(e), 10, 32)
			if err != nil {
				return bad
			}
			ids[i] = uint32(id)
		}
		req.Prompt = &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: ids}}
		return nil
	}
	return bad
}

// parseStop accepts null, a string or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list, nil
	}
	return nil, badRequest("stop", "stop: want a string or an array of strings")
}

// usageJSON is OpenAI's usage object.
type usageJSON struct {
	PromptTokens     uint32 `json:"prompt_tokens"`
	CompletionTokens uint32 `json:"completion_tokens"`
	TotalTokens      uint32 `json:"total_tokens"`
}

func toUsage(u *workerv1.Usage) *usageJSON {
	return &usageJSON{
		PromptTokens:     u.GetPromptTokens(),
		CompletionTokens: u.GetCompletionTokens(),
		TotalTokens:      u.GetPromptTokens() + u.GetCompletionTokens(),
	}
}

// finishReason maps a worker's finish reason to OpenAI's: "stop",
// "length", or null for one this router does not know (a newer worker's).
// failed is true for ERROR and CANCELLED: the generation did not complete.
func finishReason(f workerv1.FinishReason) (reason *string, failed bool) {
	var r string
	switch f {
	case workerv1.FinishReason_FINISH_REASON_STOP:
		r = "stop"
	case workerv1.FinishReason_FINISH_REASON_LENGTH:
		r = "length"
	case workerv1.FinishReason_FINISH_REASON_CANCELLED, workerv1.FinishReason_FINISH_REASON_ERROR:
		return nil, true
	default:
		return nil, false
	}
	return &r, false
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	if p.stream {
		h.stream(w, r, p, req)
		return
	}

	var (
		text  bytes.Buffer
		final *workerv1.Final
		model = p.model
	)
	created := time.Now().Unix()
	err := h.proxy.generate(r.Context(), req, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
		if model == "" {
			model = ep.Model
		}
		switch k := m.GetKind().(type) {
		case *workerv1.GenerateResponse_Chunk:
			text.WriteString(k.Chunk.GetText())
		case *workerv1.GenerateResponse_Final:
			final = k.Final
		}
		return nil
	})
	reason, failed := finishReason(final.GetFinishReason())
	if final == nil || failed {
		h.fail(w, r, id, generationError(err, final, p.names))
		return
	}
	if err != nil {
		h.log.Debug("worker stream ended with an error after its final message", "request_id", id, "error", err)
	}
	resp := response{ID: id, Created: created, Model: model, Usage: toUsage(final.GetUsage())}
	if endpoint == endpointChat {
		resp.Object = "chat.completion"
		resp.Choices = []any{chatChoice{Message: &chatMessage{Role: "assistant", Content: new(text.String())}, FinishReason: reason}}
	} else {
		resp.Object = "text_completion"
		resp.Choices = []any{textChoice{Text: text.String(), FinishReason: reason}}
	}
	writeJSON(w, http.StatusOK, resp)
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

// textChoice is a choice of /v1/completions, whole or streamed.
type textChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// chatChoice is a choice of /v1/chat/completions: Message in a whole
// response, Delta in a stream's event.
type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// chatMessage is the assistant's message, or a part of it in a delta: the
// role in the first event only, the content in those that add text, both
// absent in the last.
type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// generationError is the error of a request that did not finish with STOP
// or LENGTH: the worker's status, with the final message's description
// when there is one.
func generationError(err error, final *workerv1.Final, names fieldNames) *apiError {
	var e *apiError
	switch {
	case err != nil:
		e = fromStatus(err, names)
	case final == nil:
		e = fromStatus(status.Error(codes.Internal, "the worker ended its stream without a final message"), names)
	default:
		e = fromStatus(status.Errorf(codes.Internal, "generation ended with %s", final.GetFinishReason()), names)
	}
	if d := final.GetDescription(); d != "" {
		e.msg = clean(d)
	}
	return e
}

// fail answers a request that failed before its response began. A client
// that went away is logged as a cancel, at info: nothing failed.
func (h *httpHandler) fail(w http.ResponseWriter, r *http.Request, id string, e *apiError) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		h.log.Info("request cancelled by the client", "request_id", id, "path", r.URL.Path, "remote", r.RemoteAddr)
		return
	}
	level := hclog.Debug
	if e.status >= 500 {
		level = hclog.Warn
	}
	args := []any{"request_id", id, "path", r.URL.Path, "status", e.status, "error", e.msg, "remote", r.RemoteAddr}
	if e.cause != "" {
		args = append(args, "cause", e.cause)
	}
	h.log.Log(level, "request failed", args...)
	writeError(w, e)
}

// sse writes server-sent events, each flushed at once.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) sse { return sse{w: w, rc: http.NewResponseController(w)} }

// begin sends the status line and the event-stream headers.
func (s sse) begin() {
	hdr := s.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// send writes v, as JSON, as one event.
func (s sse) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(data) + 8)
	buf.WriteString("data: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	if _, err := s.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return s.rc.Flush()
}

// done ends the stream as OpenAI does.
func (s sse) done() {
	s.w.Write([]byte("data: [DONE]\n\n"))
	s.rc.Flush()
}

var jsonNull = json.RawMessage("null")

// stream answers with server-sent events: one per chunk (for chat, the
// first also carries the role), one with the finish reason, one with the
// usage alone when asked (stream_options.include_usage), then [DONE]. The
// status line is sent with the first message, or with the first heartbeat
// when none came within HTTPConfig.StreamHeartbeat, so a request that fails
// before either gets a proper error status; a failure after it is an error
// event and no [DONE].
func (h *httpHandler) stream(w http.ResponseWriter, r *http.Request, p *parsed, req *workerv1.GenerateRequest) {
	events := newSSE(w)
	ch := &chunks{id: req.GetRequestId(), created: time.Now().Unix(), model: p.model,
		chat: p.endpoint == endpointChat, includeUsage: p.includeUsage}
	hb := h.startHeartbeat(events, req.GetRequestId())
	var (
		started bool
		final   *workerv1.Final
	)
	err := h.proxy.generate(r.Context(), req, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
		if !started {
			started = true
			if ch.model == "" {
				ch.model = ep.Model
			}
			if !hb.stop() {
				events.begin()
			}
			if ch.chat {
				// OpenAI's first event gives the role, with empty content.
				if err := events.send(ch.event(ch.choice(new(""), "assistant", nil), nil)); err != nil {
					return err
				}
			}
		}
		switch k := m.GetKind().(type) {
		case *workerv1.GenerateResponse_Chunk:
			return events.send(ch.event(ch.choice(new(k.Chunk.GetText()), "", nil), nil))
		case *workerv1.GenerateResponse_Final:
			final = k.Final
		}
		return nil
	})
	committed := hb.stop()
	reason, failed := finishReason(final.GetFinishReason())
	if !started && !committed {
		h.fail(w, r, req.GetRequestId(), generationError(err, final, p.names))
		return
	}
	if final == nil || failed {
		h.streamFailed(events, r, req.GetRequestId(), generationError(err, final, p.names), started)
		return
	}
	ch.end(events, reason, final.GetUsage())
}

// streamFailed ends a committed stream that failed with OpenAI's error
// event. Before the first message (only heartbeats sent) it carries the
// error the status would have, type and code included.
func (h *httpHandler) streamFailed(events sse, r *http.Request, id string, e *apiError, started bool) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		// The client went away: nobody reads an error event.
		h.log.Info("request cancelled by the client", "request_id", id, "path", r.URL.Path, "remote", r.RemoteAddr)
		return
	}
	h.log.Warn("stream failed", "request_id", id, "path", r.URL.Path, "error", e.msg, "first_token", started)
	if !started {
		events.send(e.body())
		return
	}
	events.send(errorBody{Error: errorDetail{Message: e.msg, Type: "server_error"}})
}

// heartbeat sends SSE comments while a stream waits for its first message.
// Its goroutine alone writes to the response until stop returns.
type heartbeat struct {
	halt      chan struct{}
	done      chan struct{}
	once      sync.Once
	committed bool // the status line was sent; read after done
}

// startHeartbeat starts the heartbeats of a stream; with
// HTTPConfig.StreamHeartbeat 0 it sends none.
func (h *httpHandler) startHeartbeat(events sse, id string) *heartbeat {
	hb := &heartbeat{halt: make(chan struct{}), done: make(chan struct{})}
	every := h.cfg.StreamHeartbeat
	if every <= 0 {
		close(hb.done)
		return hb
	}
	go func() {
		defer close(hb.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hb.halt:
				return
			case <-t.C:
			}
			if !hb.committed {
				h.log.Debug("no first token yet: stream committed, sending heartbeats", "request_id", id, "after", every)
				events.begin()
				hb.committed = true
			}
			if _, err := io.WriteString(events.w, heartbeatComment); err != nil || events.rc.Flush() != nil {
				return // the client is gone; the request's context ends it
			}
		}
	}()
	return hb
}

// stop ends the heartbeats and reports whether they committed the
// response; the caller may write to it once stop returns.
func (hb *heartbeat) stop() (committed bool) {
	hb.once.Do(func() { close(hb.halt) })
	<-hb.done
	return hb.committed
}

// chunks makes one stream's events, each naming the request, its creation
// time and the model (the worker's, when the request named none).
type chunks struct {
	id           string
	created      int64
	model        string
	chat         bool
	includeUsage bool
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

// choice is a chunk's one choice: a delta for chat, text for completions.
func (c *chunks) choice(text *string, role string, reason *string) []any {
	if c.chat {
		return []any{chatChoice{Delta: &chatMessage{Role: role, Content: text}, FinishReason: reason}}
	}
	var t string
	if text != nil {
		t = *text
	}
	return []any{textChoice{Text: t, FinishReason: reason}}
}

// end sends the finish reason, the usage when asked, and [DONE]; a failed
// send (the client is gone) ends it early.
func (c *chunks) end(events sse, reason *string, usage *workerv1.Usage) {
	if events.send(c.event(c.choice(nil, "", reason), nil)) != nil {
		return
	}
	if c.includeUsage {
		u, _ := json.Marshal(toUsage(usage))
		if events.send(c.event([]any{}, u)) != nil {
			return
		}
	}
	events.done()
}
