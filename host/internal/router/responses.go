package router

import (
	"bytes"
	"encoding/json"
	"net/http"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// endpointResponses is OpenAI's Responses API, which vigil maps onto the
// same worker request as a chat completion.
const endpointResponses = "/v1/responses"

// noState is what a 400 for a field that needs stored state says.
const noState = "vigil keeps no state: omit it and send the whole conversation as input"

// responsesParams are the fields of POST /v1/responses: the keys of the
// openai package's ResponseCreateParamsBase. Those vigil cannot honour
// pass with their neutral values only, as chat's (params.go).
var responsesParams = map[string]paramRule{
	"model": rTaken, "input": rTaken, "instructions": rTaken, "max_output_tokens": rTaken,
	"temperature": rTaken, "top_p": rTaken, "text": rTaken, "stream": rTaken, "stream_options": rTaken,
	"store": rTaken, "prompt_cache_key": rTaken, "metadata": rTaken, "user": rTaken,
	"safety_identifier": rTaken, "parallel_tool_calls": rTaken, "tool_choice": rTaken,
	"service_tier": rTaken, "truncation": rTaken, "include": rTaken, "top_logprobs": rTaken,
	"tools": rTaken, "max_tool_calls": rTaken,
	"prompt_cache_options":   rAny,
	"prompt_cache_retention": rAny,
	"reasoning":              {neutral: allNull, want: "omit it or send null: vigil has no reasoning settings"},
	"background":             rFalse,
	"previous_response_id":   {neutral: isNull, want: noState},
	"conversation":           {neutral: isNull, want: noState},
	"prompt":                 {neutral: isNull, want: "vigil keeps no stored prompts: omit it and send the prompt as instructions and input"},
	"background_options":     rNullOnly,
	"context_management":     rNullOnly,
	"image":                  rNullOnly,
	"moderation":             rNullOnly,
	"access_programs":        rNullOnly,
}

// allNull accepts an object whose values are all null ({} too), as a
// client sends reasoning with nothing set.
func allNull(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return false
	}
	for _, v := range m {
		if !isNull(v) {
			return false
		}
	}
	return true
}

// responsesRequest is the body of POST /v1/responses, the fields vigil
// reads; checkParams has vetted the rest.
type responsesRequest struct {
	Model             string          `json:"model"`
	Input             json.RawMessage `json:"input"`
	Instructions      *string         `json:"instructions"`
	MaxOutputTokens   *int64          `json:"max_output_tokens"`
	Temperature       *float32        `json:"temperature"`
	TopP              *float32        `json:"top_p"`
	Text              json.RawMessage `json:"text"`
	Stream            *bool           `json:"stream"`
	StreamOptions     json.RawMessage `json:"stream_options"`
	Store             *bool           `json:"store"`
	PromptCacheKey    *string         `json:"prompt_cache_key"`
	Metadata          json.RawMessage `json:"metadata"`
	User              *string         `json:"user"`
	SafetyIdentifier  *string         `json:"safety_identifier"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ServiceTier       *string         `json:"service_tier"`
	Truncation        *string         `json:"truncation"`
	Include           json.RawMessage `json:"include"`
	TopLogprobs       *int64          `json:"top_logprobs"`
	Tools             json.RawMessage `json:"tools"`
	MaxToolCalls      *int64          `json:"max_tool_calls"`
	// toolsEcho are the tools as the response echoes them (setTools).
	toolsEcho []respTool
}

// parseResponses reads and checks a Responses request and maps it onto
// the worker request a chat completion of its messages would be.
func (h *httpHandler) parseResponses(w http.ResponseWriter, r *http.Request) (*parsed, *responsesRequest, *workerv1.GenerateRequest, *apiError) {
	fields, body, aerr := h.readBody(w, r)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	if aerr := checkParams(endpointResponses, fields); aerr != nil {
		return nil, nil, nil, aerr
	}
	var c responsesRequest
	if aerr := decodeBody(body, &c); aerr != nil {
		return nil, nil, nil, aerr
	}
	p, req, aerr := c.toWorker(h.cfg.MaxBodyBytes)
	return p, &c, req, aerr
}

// toWorker checks c and maps it onto a worker request; maxText bounds the
// text an item_reference id may hold.
func (c *responsesRequest) toWorker(maxText int64) (*parsed, *workerv1.GenerateRequest, *apiError) {
	p := &parsed{endpoint: endpointResponses, model: c.Model, stream: c.Stream != nil && *c.Stream, n: 1,
		names: fieldNames{prompt: "input", maxTokens: "max_output_tokens"}}
	req := &workerv1.GenerateRequest{
		Model:    c.Model,
		Sampling: &workerv1.Sampling{Temperature: c.Temperature, TopP: c.TopP},
		Stopping: &workerv1.Stopping{},
	}
	if c.PromptCacheKey != nil {
		req.PromptCacheKey = *c.PromptCacheKey
	}
	for _, set := range []func() *apiError{
		func() *apiError { return c.setInput(req, maxText) },
		func() *apiError { return c.setTools(req) },
		func() *apiError { return c.setText(req, &p.names) },
		func() *apiError { return c.setMaxOutput(req.Stopping) },
		func() *apiError { return c.checkOptions(p) },
		func() *apiError { return c.setLogprobs(req, p) },
	} {
		if aerr := set(); aerr != nil {
			return nil, nil, aerr
		}
	}
	return p, req, nil
}

func (c *responsesRequest) setMaxOutput(s *workerv1.Stopping) *apiError {
	if m := c.MaxOutputTokens; m != nil {
		if *m < 1 || *m > maxUint32 {
			return badRequest("max_output_tokens", "max_output_tokens: want an integer from 1 to %d, got %d", uint32(maxUint32), *m)
		}
		s.MaxTokens = uint32(*m)
	}
	return nil
}

// checkOptions checks the fields taken as they are: stream_options (with
// stream only, include_obfuscation: vigil's events carry no padding),
// service_tier, truncation and the identifiers' types.
func (c *responsesRequest) checkOptions(p *parsed) *apiError {
	if !isNull(c.StreamOptions) {
		if !p.stream {
			return badRequest("stream_options", "stream_options: only allowed when stream is true")
		}
		var opts map[string]json.RawMessage
		if json.Unmarshal(c.StreamOptions, &opts) != nil {
			return badRequest("stream_options", `stream_options: want an object such as {"include_obfuscation": false}`)
		}
		for k, v := range opts {
			var b *bool
			if k != "include_obfuscation" || json.Unmarshal(v, &b) != nil {
				return badRequest("stream_options", "stream_options.%s: vigil takes include_obfuscation (a boolean) only", k)
			}
		}
	}
	if t := c.ServiceTier; t != nil && *t != "auto" && *t != "default" {
		return badRequest("service_tier", `service_tier: vigil cannot honour service_tier = %q; omit it or send "auto"`, *t)
	}
	if t := c.Truncation; t != nil && *t != "disabled" {
		return badRequest("truncation", `truncation: vigil cannot honour truncation = %q (it drops no input); omit it or send "disabled"`, *t)
	}
	if m := bytes.TrimSpace(c.Metadata); !isNull(m) && m[0] != '{' {
		return badRequest("metadata", "metadata: want an object of strings, got %s", clip(m))
	}
	return nil
}

// setText maps text.format onto the structured output, as chat's
// response_format (its json_schema's fields flat in format), and checks
// text.verbosity, chat's verbosity.
func (c *responsesRequest) setText(req *workerv1.GenerateRequest, names *fieldNames) *apiError {
	if isNull(c.Text) {
		return nil
	}
	m, aerr := object("text", c.Text)
	if aerr != nil {
		return aerr
	}
	for k, v := range m {
		switch {
		case k == "format" || isNull(v):
		case k == "verbosity":
			if !oneOf(`"medium"`)(v) {
				return badRequest("text.verbosity", `text.verbosity: vigil cannot honour verbosity %s; omit it or send "medium"`, clip(v))
			}
		default:
			return badRequest("text."+k, "text.%s: not a field of text (format, verbosity)", k)
		}
	}
	so, aerr := parseTextFormat(m["format"])
	if so != nil {
		req.StructuredOutput, names.structured = so, "text.format"
	}
	return aerr
}

// parseTextFormat reads text.format: {"type": "text"}, {"type":
// "json_object"}, or {"type": "json_schema", "name", "schema", "strict",
// "description"}.
func parseTextFormat(raw json.RawMessage) (*workerv1.StructuredOutput, *apiError) {
	const param = "text.format"
	if isNull(raw) {
		return nil, nil
	}
	m, aerr := object(param, raw)
	if aerr != nil {
		return nil, aerr
	}
	rawType := m["type"]
	var typ string
	json.Unmarshal(rawType, &typ)
	delete(m, "type")
	switch typ {
	case "text", "json_object":
		for k := range m {
			return nil, badRequest(param+"."+k, "%s.%s: not a field of a format of type %q", param, k, typ)
		}
		if typ == "text" {
			return nil, nil
		}
		return &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}, nil
	case "json_schema":
		rest, _ := json.Marshal(m)
		so, _, aerr := parseJSONSchema(param, rest, param)
		return so, aerr
	}
	return nil, badRequest(param+".type", `%s.type: want "text", "json_object" or "json_schema", got %s`, param, clip(rawType))
}

// includeLogprobs is the include value that asks for the output text's
// logprobs, the one include value vigil gives.
const includeLogprobs = "message.output_text.logprobs"

// setLogprobs maps include's message.output_text.logprobs, with
// top_logprobs alternatives a position, onto chat's logprobs. As OpenAI
// (and vLLM), top_logprobs alone asks for none.
func (c *responsesRequest) setLogprobs(req *workerv1.GenerateRequest, p *parsed) *apiError {
	var top int64
	if c.TopLogprobs != nil {
		top = *c.TopLogprobs
		if top < 0 || top > maxTopLogprobs {
			return badRequest("top_logprobs", "top_logprobs: want an integer from 0 to %d, got %d", maxTopLogprobs, top)
		}
	}
	var include []string
	if !isNull(c.Include) && json.Unmarshal(c.Include, &include) != nil {
		return badRequest("include", "include: want a list of strings, got %s", clip(c.Include))
	}
	for _, v := range include {
		if v != includeLogprobs {
			return badRequest("include", "include: vigil gives %q only, got %q; omit the others", includeLogprobs, v)
		}
	}
	if len(include) == 0 {
		return nil
	}
	p.logprobs, p.top, p.names.logprobs = true, uint32(top), "include"
	if top > 0 {
		p.names.logprobs = "top_logprobs"
	}
	req.Logprobs = &workerv1.Logprobs{Output: true, Top: p.top}
	return nil
}
