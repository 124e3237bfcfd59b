package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

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
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	RepetitionPenalty   *float64        `json:"repetition_penalty"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	GuidedJSON          json.RawMessage `json:"guided_json"`
	GuidedRegex         json.RawMessage `json:"guided_regex"`
	GuidedChoice        json.RawMessage `json:"guided_choice"`
	GuidedGrammar       json.RawMessage `json:"guided_grammar"`
	StructuredOutputs   json.RawMessage `json:"structured_outputs"`
	Echo                *bool           `json:"echo"`
	Logprobs            json.RawMessage `json:"logprobs"`
	TopLogprobs         *int64          `json:"top_logprobs"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	PromptCacheKey      *string         `json:"prompt_cache_key"`
	// Store is read to check it is a boolean: nothing is stored.
	Store *bool `json:"store"`
}

// parsed is a checked request: what the response needs of it, and the
// names its fields go by in errors.
type parsed struct {
	endpoint     string
	model        string
	stream       bool
	includeUsage bool
	// n is the choices per prompt, 1 when not asked.
	n int
	// prompts are the prompts of a completions batch (a list of strings
	// or of token-id lists), one worker request each, each holding only
	// its prompt; nil for one prompt.
	prompts []*workerv1.GenerateRequest
	// echo: completions' echo, the prompt put in front of each choice.
	echo bool
	// logprobs: the choices carry logprobs, with top alternatives a
	// position; promptLogprobs: completions' echo puts the prompt's first.
	logprobs, promptLogprobs bool
	top                      uint32
	// promptOnly: completions' echo with max_tokens 0 (lm-eval-harness's
	// loglikelihood requests): the prompt alone, the one token generated
	// for it dropped.
	promptOnly bool
	names      fieldNames
}

// fieldNames are the request's own names for the worker API's prompt,
// max_tokens and structured output, which errors use.
type fieldNames struct {
	prompt     string // prompt or messages
	maxTokens  string // max_tokens or max_completion_tokens
	structured string // the field that set structured_output
	logprobs   string // logprobs or top_logprobs
}

// param is the request's own name of the parameter that asked for the
// capability need: the one a 400 names when no worker meets it.
func (n fieldNames) param(need string) string {
	switch need {
	case discovery.CapN, discovery.CapPresencePenalty, discovery.CapFrequencyPenalty, discovery.CapRepetitionPenalty,
		discovery.CapLogitBias, discovery.CapStop, discovery.CapTopK, discovery.CapMinP, discovery.CapSeed,
		discovery.CapMinTokens, discovery.CapIgnoreEOS, discovery.CapChatTemplateKwargs, discovery.CapTools:
		return need
	case discovery.CapPromptTokenIDs:
		return "echo"
	case discovery.CapLogprobs, discovery.CapPromptLogprobs:
		return n.logprobs
	}
	if n.structured != "" {
		return n.structured
	}
	return need
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
	if aerr := decodeBody(body, &c); aerr != nil {
		return nil, nil, aerr
	}
	return c.toWorker(endpoint)
}

// decodeBody decodes a checked body into v, a 400 naming a field of the
// wrong type.
func decodeBody(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return badRequest(te.Field, "%s: want %s, got a JSON %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return badRequest("", "request body is not valid JSON: %v", err)
	}
	return nil
}

// toWorker checks c and maps it onto a worker request: for a completions
// batch, the request of its first prompt, parsed.prompts holding them all.
func (c *request) toWorker(endpoint string) (*parsed, *workerv1.GenerateRequest, *apiError) {
	p := &parsed{endpoint: endpoint, model: c.Model, stream: c.Stream != nil && *c.Stream, n: 1,
		names: fieldNames{prompt: "prompt", maxTokens: "max_tokens"}}
	req := &workerv1.GenerateRequest{
		Model:    c.Model,
		Sampling: &workerv1.Sampling{Temperature: c.Temperature, TopP: c.TopP, Seed: c.Seed},
		Stopping: &workerv1.Stopping{IgnoreEos: c.IgnoreEOS != nil && *c.IgnoreEOS},
	}
	if c.PromptCacheKey != nil {
		req.PromptCacheKey = *c.PromptCacheKey
	}
	for _, set := range []func() *apiError{
		func() *apiError { return c.setInput(endpoint, req, p) },
		func() *apiError { return c.setStructuredOutput(req, &p.names) },
		func() *apiError { return c.setLengths(endpoint, req, p) },
		func() *apiError { return c.setSampling(req.Sampling) },
		func() *apiError { return c.setPenalties(req.Sampling) },
		func() *apiError { return c.setStops(req.Stopping) },
		func() *apiError { return c.setEcho(p) },
		func() *apiError { return c.setLogprobs(endpoint, req, p) },
		func() *apiError { return c.setStreamOptions(p) },
	} {
		if aerr := set(); aerr != nil {
			return nil, nil, aerr
		}
	}
	return p, req, nil
}

// setInput maps the prompt (completions) or the messages (chat) onto req,
// with completions' default max_tokens.
func (c *request) setInput(endpoint string, req *workerv1.GenerateRequest, p *parsed) *apiError {
	if endpoint == endpointChat {
		p.names.prompt = "messages"
		if aerr := setMessages(req, c.Messages); aerr != nil {
			return aerr
		}
		return setTemplateKwargs(req.GetMessages(), c.ChatTemplateKwargs)
	}
	// OpenAI's legacy default; chat's is the rest of the context, which
	// the worker (or its engine) knows.
	req.Stopping.MaxTokens = defaultMaxTokens
	prompts, aerr := parsePrompt(c.Prompt)
	if aerr != nil {
		return aerr
	}
	req.Prompt = prompts[0].Prompt
	if len(prompts) > 1 {
		p.prompts = prompts
	}
	return nil
}

// maxN is the most choices a request may ask for (vLLM's limit too).
const maxN = 128

// setLengths checks n and maps it and the lengths onto req: max_tokens
// (chat's max_completion_tokens first) and vLLM's min_tokens, which
// max_tokens bounds, the default one too.
func (c *request) setLengths(endpoint string, req *workerv1.GenerateRequest, p *parsed) *apiError {
	if c.N != nil {
		if n := *c.N; n < 1 || n > maxN {
			return badRequest("n", "n: want an integer from 1 to %d, got %d", maxN, n)
		}
		if p.n = int(*c.N); p.n > 1 {
			req.N = uint32(p.n)
		}
	}
	s, names := req.Stopping, &p.names
	maxTokens := c.MaxTokens
	if endpoint == endpointChat && c.MaxCompletionTokens != nil {
		maxTokens, names.maxTokens = c.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTokens != nil && *maxTokens == 0 && endpoint == endpointCompletions && c.Echo != nil && *c.Echo {
		// The prompt alone, as vLLM answers it: one token generated,
		// then dropped.
		p.promptOnly, maxTokens = true, new(int64(1))
	}
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > maxUint32 {
			return badRequest(names.maxTokens, "%s: want an integer from 1 to %d%s, got %d", names.maxTokens, uint32(maxUint32),
				map[bool]string{true: " (or 0 with echo: the prompt alone)"}[endpoint == endpointCompletions], *maxTokens)
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

// setPenalties maps presence_penalty, frequency_penalty,
// repetition_penalty and logit_bias onto s; their neutral values (0, 1,
// {}) set nothing, so they need no capability.
func (c *request) setPenalties(s *workerv1.Sampling) *apiError {
	for _, pen := range []struct {
		name string
		v    *float64
		to   *float32
	}{{"presence_penalty", c.PresencePenalty, &s.PresencePenalty}, {"frequency_penalty", c.FrequencyPenalty, &s.FrequencyPenalty}} {
		if pen.v == nil {
			continue
		}
		if v := *pen.v; !(v >= -2 && v <= 2) {
			return badRequest(pen.name, "%s: want a number from -2 to 2, got %g", pen.name, v)
		}
		*pen.to = float32(*pen.v)
	}
	if rp := c.RepetitionPenalty; rp != nil {
		if !(*rp > 0) || math.IsInf(*rp, 0) {
			return badRequest("repetition_penalty", "repetition_penalty: want a number above 0 (1: none), got %g", *rp)
		}
		if *rp != 1 {
			s.RepetitionPenalty = new(float32(*rp))
		}
	}
	bias, aerr := parseLogitBias(c.LogitBias)
	s.LogitBias = bias
	return aerr
}

// parseLogitBias reads logit_bias: an object of token ids (decimal
// strings) to biases from -100 to 100; nil when null or empty.
func parseLogitBias(raw json.RawMessage) (map[uint32]float32, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, badRequest("logit_bias", `logit_bias: want an object of token ids to biases from -100 to 100, such as {"50256": -100}`)
	}
	if len(m) == 0 {
		return nil, nil
	}
	bias := make(map[uint32]float32, len(m))
	for k, v := range m {
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil {
			return nil, badRequest("logit_bias", "logit_bias: key %q: want a token id (an integer from 0 to %d as a string)", clipStr(k), uint32(maxUint32))
		}
		var b float64
		if json.Unmarshal(v, &b) != nil || !(b >= -100 && b <= 100) {
			return nil, badRequest("logit_bias", "logit_bias[%q]: want a number from -100 to 100, got %s", k, clip(v))
		}
		bias[uint32(id)] = float32(b)
	}
	return bias, nil
}

// clipStr shortens a string for a message.
func clipStr(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// setEcho reads completions' echo into p; send asks for the prompt of a
// token-id prompt (promptRequest).
func (c *request) setEcho(p *parsed) *apiError {
	p.echo = c.Echo != nil && *c.Echo
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

// maxPrompts is the most prompts a batch may hold: OpenAI's limit on an
// array input.
const maxPrompts = 2048

// parsePrompt reads a completions prompt: a string (text), an array of
// integers (token ids), or a batch, an array of strings or of token-id
// arrays, one prompt each. An empty prompt, which no engine can complete,
// is refused, and so is an empty batch.
func parsePrompt(raw json.RawMessage) ([]*workerv1.GenerateRequest, *apiError) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, badRequest("prompt", "prompt: required")
	}
	bad := badRequest("prompt", "prompt: want a string, an array of token ids (integers from 0 to %d), "+
		"or an array of either (a batch)", uint32(maxUint32))
	var elems []json.RawMessage
	switch {
	case raw[0] == '"':
		pr, aerr := onePrompt("prompt", raw)
		return []*workerv1.GenerateRequest{pr}, aerr
	case raw[0] != '[' || json.Unmarshal(raw, &elems) != nil:
		return nil, bad
	case len(elems) == 0:
		return nil, badRequest("prompt", "prompt: must not be empty")
	}
	if first := bytes.TrimSpace(elems[0]); len(first) > 0 && first[0] != '"' && first[0] != '[' {
		pr, aerr := onePrompt("prompt", raw)
		return []*workerv1.GenerateRequest{pr}, aerr
	}
	if len(elems) > maxPrompts {
		return nil, badRequest("prompt", "prompt: a batch of %d prompts; at most %d", len(elems), maxPrompts)
	}
	prompts := make([]*workerv1.GenerateRequest, len(elems))
	for i, e := range elems {
		e = bytes.TrimSpace(e)
		if len(e) == 0 || e[0] != bytes.TrimSpace(elems[0])[0] {
			return nil, badRequest("prompt", "prompt[%d]: a batch is all strings or all arrays of token ids", i)
		}
		pr, aerr := onePrompt(fmt.Sprintf("prompt[%d]", i), e)
		if aerr != nil {
			return nil, aerr
		}
		prompts[i] = pr
	}
	return prompts, nil
}

// onePrompt reads one prompt, a non-empty string or array of token ids;
// name is its place in errors.
func onePrompt(name string, raw json.RawMessage) (*workerv1.GenerateRequest, *apiError) {
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, badRequest("prompt", "%s: want a string", name)
		}
		if s == "" {
			return nil, badRequest("prompt", "%s: must not be empty", name)
		}
		return &workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Text{Text: s}}, nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, badRequest("prompt", "%s: want an array of token ids", name)
	}
	if len(elems) == 0 {
		return nil, badRequest("prompt", "%s: must not be empty", name)
	}
	ids := make([]uint32, len(elems))
	for i, e := range elems {
		id, err := strconv.ParseUint(string(bytes.TrimSpace(e)), 10, 32)
		if err != nil {
			return nil, badRequest("prompt", "%s[%d]: want a token id (an integer from 0 to %d), got %s", name, i, uint32(maxUint32), clip(e))
		}
		ids[i] = uint32(id)
	}
	return &workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: ids}}}, nil
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
