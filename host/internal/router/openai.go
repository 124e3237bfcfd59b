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
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxBodyBytes bounds a request body: 1 MiB holds a prompt of a few
// hundred thousand characters or token ids, far beyond any model's context,
// while keeping a careless client from filling memory.
const DefaultMaxBodyBytes = 1 << 20

// RetryAfter is the Retry-After of every 503: a model whose workers are
// all away (asleep, restarting, draining) or a request every worker
// refused. OpenAI's clients wait that long before their next try.
const RetryAfter = 5 * time.Second

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
	// Logger receives a line per failed request; nil discards.
	Logger hclog.Logger
}

// NewHTTPHandler returns the OpenAI-compatible HTTP API over p:
//
//   - POST /v1/completions: a completion, whole or streamed as server-sent
//     events (OpenAI's legacy completions API, with top_k and ignore_eos as
//     extensions; n must be 1; logprobs, echo, best_of and suffix are not
//     supported and ignored like any unknown field).
//   - GET /v1/models: the served model names of the current workers,
//     what can be served now; a model remembered while its workers are
//     away is not listed (its requests get 503).
//   - GET /health: 200 while the router can route (Pool.Serving: at least
//     one worker), else 503; the gRPC health service says the same.
//
// Errors have OpenAI's body, {"error":{"message","type","param","code"}};
// every 503 carries Retry-After (RetryAfter). With cfg.APIKey, every path
// but /health needs the key first.
func NewHTTPHandler(p *Proxy, cfg HTTPConfig) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &httpHandler{proxy: p, cfg: cfg, log: orNull(cfg.Logger)}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", h.completions)
	mux.HandleFunc("/v1/models", h.models)
	mux.HandleFunc("/health", h.health)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "not_found_error",
			msg: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)})
	})
	if cfg.APIKey == "" {
		return mux
	}
	return requireKey(cfg.APIKey, mux)
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
	code   string // OpenAI's error code, if any (invalid_api_key)
	// retryAfter, if not 0, is sent as Retry-After.
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...), param: param}
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

// fromStatus maps a gRPC status (a worker's, or the pool's) to an OpenAI
// error.
func fromStatus(err error) *apiError {
	if tl, ok := errors.AsType[*TooLargeError](err); ok {
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", msg: tl.Error(), param: "prompt"}
	}
	st := status.Convert(err)
	e := &apiError{msg: st.Message()}
	switch st.Code() {
	case codes.InvalidArgument:
		e.status, e.typ = http.StatusBadRequest, "invalid_request_error"
		e.param = paramOf(e.msg)
	case codes.NotFound:
		e.status, e.typ = http.StatusNotFound, "not_found_error"
	case codes.ResourceExhausted:
		e.status, e.typ = http.StatusTooManyRequests, "rate_limit_error"
	case codes.Unavailable:
		e.status, e.typ, e.retryAfter = http.StatusServiceUnavailable, "server_error", RetryAfter
	case codes.DeadlineExceeded:
		e.status, e.typ = http.StatusGatewayTimeout, "server_error"
	default:
		e.status, e.typ = http.StatusInternalServerError, "server_error"
	}
	return e
}

// paramOf is the request field a worker's or the pool's INVALID_ARGUMENT
// message names first ("prompt: ...", "prompt.text: ..."), when it is one of
// the completion fields the router takes; "" otherwise.
func paramOf(msg string) string {
	field, _, _ := strings.Cut(msg, ":")
	field, _, _ = strings.Cut(field, ".")
	switch field {
	case "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "n", "top_k", "ignore_eos":
		return field
	}
	return ""
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
	if !serving {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "no workers", "workers": n})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "workers": n})
}

type modelJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (h *httpHandler) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	data := []modelJSON{}
	for _, m := range h.proxy.pool.Models() {
		data = append(data, modelJSON{ID: m, Object: "model", OwnedBy: "vigil"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// completionRequest is the body of POST /v1/completions. Pointers tell an
// absent (or null) field from a zero one.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int64          `json:"max_tokens"`
	Temperature   *float32        `json:"temperature"`
	TopP          *float32        `json:"top_p"`
	TopK          *int64          `json:"top_k"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	N             *int64          `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
}

// parseCompletion reads and checks a completion request and maps it to the
// worker API.
func (h *httpHandler) parseCompletion(w http.ResponseWriter, r *http.Request) (*completionRequest, *workerv1.GenerateRequest, *apiError) {
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
	var c completionRequest
	if err := json.Unmarshal(body, &c); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			if te.Field == "" {
				return nil, nil, badRequest("", "request body must be a JSON object")
			}
			return nil, nil, badRequest(te.Field, "%s: want %s, got a JSON %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return nil, nil, badRequest("", "request body is not valid JSON: %v", err)
	}

	req := &workerv1.GenerateRequest{
		Model:    c.Model,
		Sampling: &workerv1.Sampling{Temperature: c.Temperature, TopP: c.TopP, Seed: c.Seed},
		Stopping: &workerv1.Stopping{MaxTokens: defaultMaxTokens, IgnoreEos: c.IgnoreEOS},
	}
	if perr := setPrompt(req, c.Prompt); perr != nil {
		return nil, nil, perr
	}
	if c.N != nil && *c.N != 1 {
		return nil, nil, badRequest("n", "n: only n=1 is supported, got %d", *c.N)
	}
	if c.MaxTokens != nil {
		if *c.MaxTokens < 1 || *c.MaxTokens > math.MaxUint32 {
			return nil, nil, badRequest("max_tokens", "max_tokens: want an integer from 1 to %d, got %d", uint32(math.MaxUint32), *c.MaxTokens)
		}
		req.Stopping.MaxTokens = uint32(*c.MaxTokens)
	}
	if c.TopK != nil {
		// -1 is the customary "all tokens" (vLLM's); the worker API says 0.
		switch k := *c.TopK; {
		case k == -1:
			req.Sampling.TopK = proto.Uint32(0)
		case k < -1 || k > math.MaxUint32:
			return nil, nil, badRequest("top_k", "top_k: want -1 or 0 (all tokens) or a positive integer, got %d", k)
		default:
			req.Sampling.TopK = proto.Uint32(uint32(k))
		}
	}
	stop, serr := parseStop(c.Stop)
	if serr != nil {
		return nil, nil, serr
	}
	req.Stopping.Stop = stop
	return &c, req, nil
}

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
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return badRequest("prompt", "prompt: required")
	}
	bad := badRequest("prompt", "prompt: want a string or an array of token ids (integers from 0 to %d); "+
		"arrays of strings and nested arrays (batches) are not supported", uint32(math.MaxUint32))
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
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
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

// completion is a response body, whole or one event of a stream.
type completion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *usageJSON `json:"usage"`
}

type choice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

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

func (h *httpHandler) completions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, http.MethodPost)
		return
	}
	c, req, aerr := h.parseCompletion(w, r)
	if aerr != nil {
		h.fail(w, r, "", aerr)
		return
	}
	id := "cmpl-" + newRequestID()
	req.RequestId = id
	if c.Stream {
		h.stream(w, r, c, req)
		return
	}

	var (
		text  bytes.Buffer
		final *workerv1.Final
		model = c.Model
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
		h.fail(w, r, id, generationError(err, final))
		return
	}
	if err != nil {
		h.log.Debug("worker stream ended with an error after its final message", "request_id", id, "error", err)
	}
	writeJSON(w, http.StatusOK, completion{
		ID: id, Object: "text_completion", Created: created, Model: model,
		Choices: []choice{{Text: text.String(), FinishReason: reason}},
		Usage:   toUsage(final.GetUsage()),
	})
}

// generationError is the error of a request that did not finish with STOP
// or LENGTH: the worker's status, with the final message's description
// when there is one.
func generationError(err error, final *workerv1.Final) *apiError {
	var e *apiError
	switch {
	case err != nil:
		e = fromStatus(err)
	case final == nil:
		e = fromStatus(status.Error(codes.Internal, "the worker ended its stream without a final message"))
	default:
		e = fromStatus(status.Errorf(codes.Internal, "generation ended with %s", final.GetFinishReason()))
	}
	if d := final.GetDescription(); d != "" {
		e.msg = d
	}
	return e
}

func (h *httpHandler) fail(w http.ResponseWriter, r *http.Request, id string, e *apiError) {
	level := hclog.Debug
	if e.status >= 500 {
		level = hclog.Warn
	}
	h.log.Log(level, "completion failed", "request_id", id, "status", e.status, "error", e.msg, "remote", r.RemoteAddr)
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

// stream answers with server-sent events: one per chunk, one with the
// finish reason (and the usage when asked), then [DONE]. The status line is
// sent with the first chunk, so a request that fails before it gets a
// proper error status; a failure after it is an error event and no [DONE].
func (h *httpHandler) stream(w http.ResponseWriter, r *http.Request, c *completionRequest, req *workerv1.GenerateRequest) {
	events := newSSE(w)
	var (
		started bool
		final   *workerv1.Final
		model   = c.Model
	)
	created := time.Now().Unix()
	chunk := func(text string, reason *string, usage *usageJSON) completion {
		return completion{
			ID: req.GetRequestId(), Object: "text_completion", Created: created, Model: model,
			Choices: []choice{{Text: text, FinishReason: reason}}, Usage: usage,
		}
	}
	err := h.proxy.generate(r.Context(), req, func(ep discovery.Registration, m *workerv1.GenerateResponse) error {
		if !started {
			started = true
			if model == "" {
				model = ep.Model
			}
			events.begin()
		}
		switch k := m.GetKind().(type) {
		case *workerv1.GenerateResponse_Chunk:
			return events.send(chunk(k.Chunk.GetText(), nil, nil))
		case *workerv1.GenerateResponse_Final:
			final = k.Final
		}
		return nil
	})
	reason, failed := finishReason(final.GetFinishReason())
	if !started {
		h.fail(w, r, req.GetRequestId(), generationError(err, final))
		return
	}
	if final == nil || failed {
		if errors.Is(r.Context().Err(), context.Canceled) {
			return // the client went away: nobody reads an error event
		}
		e := generationError(err, final)
		h.log.Warn("completion stream failed", "request_id", req.GetRequestId(), "error", e.msg)
		events.send(errorBody{Error: errorDetail{Message: e.msg, Type: "server_error"}})
		return
	}
	var usage *usageJSON
	if c.StreamOptions != nil && c.StreamOptions.IncludeUsage {
		usage = toUsage(final.GetUsage())
	}
	if events.send(chunk("", reason, usage)) != nil {
		return
	}
	events.done()
}
