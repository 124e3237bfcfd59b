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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
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
//   - POST /v1/responses: OpenAI's Responses API, its input sent as a
//     chat's messages; whole or as the Responses events (responses*.go).
//   - GET /v1/models and GET /v1/models/{id}: the served models of the
//     current workers, what can be served now, with max_model_len when
//     their workers publish it; a model remembered while its workers are
//     away is not listed (its requests get 503).
//   - POST /tokenize and POST /detokenize: vLLM's tokenizer endpoints,
//     through the worker API's Tokenize and Detokenize, sent only to
//     workers that list the tokenize capability (else 400 naming the
//     model); see tokenize_http.go for what is taken.
//   - POST /v1/embeddings: OpenAI's embeddings, one worker Embed per
//     input, sent only to workers of an embedding model (they list the
//     embed capability; else 400 naming the model), float or base64; see
//     embed_http.go. Chat and completions never go to such workers.
//   - GET /health: 200 while the router can route (Pool.Serving: at least
//     one worker), else 503; the gRPC health service says the same.
//
// A request field vigil cannot honour gets 400 naming it, unless it holds
// the neutral value clients send (logprobs false, functions [], ...; see
// params.go); so does a field OpenAI's API does not have. A field that
// needs a worker capability (structured output, n, the penalties, ...)
// goes only to workers that list it, else 400 naming it (needs.go). A
// completions prompt list is a batch, one worker request per prompt
// (respond.go). Errors have OpenAI's body, {"error":{"message","type","param","code"}},
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
	mux.HandleFunc(endpointResponses, h.responses)
	mux.HandleFunc(endpointTokenize, h.tokenize)
	mux.HandleFunc(endpointDetokenize, h.detokenize)
	mux.HandleFunc(endpointEmbeddings, h.embeddings)
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

// finishReason maps a worker's finish reason to OpenAI's: "stop",
// "length", "tool_calls", or null for one this router does not know (a newer worker's).
// failed is true for ERROR and CANCELLED: the generation did not complete.
func finishReason(f workerv1.FinishReason) (reason *string, failed bool) {
	var r string
	switch f {
	case workerv1.FinishReason_FINISH_REASON_STOP:
		r = "stop"
	case workerv1.FinishReason_FINISH_REASON_LENGTH:
		r = "length"
	case workerv1.FinishReason_FINISH_REASON_TOOL_CALLS:
		r = "tool_calls"
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
