package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// An endpoint of the OpenAI API that takes a generation request.
const (
	endpointCompletions = "/v1/completions"
	endpointChat        = "/v1/chat/completions"
)

// paramRule is how the router treats one top-level field of a request.
type paramRule struct {
	// Taken: the router maps the field onto the worker API (the request
	// struct reads it). Otherwise the field is one vigil cannot honour and
	// only its neutral values pass.
	taken bool
	// neutral accepts the values that ask for nothing (null, and OpenAI's
	// default); nil accepts any value (a field without effect on
	// generation, such as user).
	neutral func(raw json.RawMessage) bool
	// want says what the neutral values are, for the error.
	want string
}

var (
	rTaken    = paramRule{taken: true}
	rAny      = paramRule{}
	rNullOnly = paramRule{neutral: isNull, want: "omit it or send null"}
	rFalse    = paramRule{neutral: oneOf(`false`), want: "omit it or send false"}
	rTrue     = paramRule{neutral: oneOf(`true`), want: "omit it or send true"}
	rOne      = paramRule{neutral: isNumber(1), want: "omit it or send 1"}
)

// commonParams are the fields both endpoints share.
var commonParams = map[string]paramRule{
	"model": rTaken, "temperature": rTaken, "top_p": rTaken, "top_k": rTaken, "seed": rTaken,
	"stop": rTaken, "stop_token_ids": rTaken, "n": rTaken, "stream": rTaken, "stream_options": rTaken,
	"ignore_eos": rTaken, "max_tokens": rTaken, "min_tokens": rTaken, "min_p": rTaken,
	"presence_penalty": rTaken, "frequency_penalty": rTaken, "repetition_penalty": rTaken, "logit_bias": rTaken,
	// Structured output (structured.go), OpenAI's and vLLM's.
	"response_format": rTaken, "guided_json": rTaken, "guided_regex": rTaken, "guided_choice": rTaken,
	"guided_grammar": rTaken, "structured_outputs": rTaken,
	"guided_decoding_backend": rNullOnly, "guided_whitespace_pattern": rNullOnly,
	// Read for placement; stops at the router (nothing is stored).
	"prompt_cache_key": rTaken, "store": rTaken,
	// No effect on generation: OpenAI's cache hints (vigil keeps no cache
	// of its own; the engines' prefix caches need none) and identifiers.
	"prompt_cache_options": rAny, "prompt_cache_retention": rAny,
	"user": rAny, "safety_identifier": rAny, "metadata": rAny,
	// vLLM's extensions that clients of vLLM send with their defaults.
	"skip_special_tokens":        rTrue,
	"include_stop_str_in_output": rFalse,
}

// completionParams are /v1/completions' own fields.
var completionParams = map[string]paramRule{
	"prompt":   rTaken,
	"echo":     rTaken,
	"logprobs": rTaken,
	"best_of":  rOne,
	"suffix":   {neutral: oneOf(`""`), want: `omit it or send null or ""`},
}

// chatParams are /v1/chat/completions' own fields.
var chatParams = map[string]paramRule{
	"messages":               rTaken,
	"max_completion_tokens":  rTaken,
	"chat_template_kwargs":   rTaken,
	"logprobs":               rTaken,
	"top_logprobs":           rTaken,
	"tools":                  rTaken,
	"tool_choice":            rTaken,
	"parallel_tool_calls":    rTaken,
	"functions":              {neutral: oneOf(`[]`), want: "the deprecated function calling; send tools instead"},
	"function_call":          {neutral: oneOf(`"none"`), want: "the deprecated function calling; send tool_choice instead"},
	"service_tier":           {neutral: oneOf(`"auto"`, `"default"`), want: `omit it or send "auto"`},
	"modalities":             {neutral: oneOf(`["text"]`), want: `omit it or send ["text"]`},
	"audio":                  rNullOnly,
	"prediction":             rNullOnly,
	"reasoning_effort":       rNullOnly,
	"web_search_options":     rNullOnly,
	"moderation":             rNullOnly,
	"verbosity":              {neutral: oneOf(`"medium"`), want: `omit it or send "medium"`},
	"add_generation_prompt":  rTrue,
	"continue_final_message": rFalse,
}

// rule returns how endpoint treats field; ok is false for a field it does
// not know.
func rule(endpoint, field string) (r paramRule, ok bool) {
	if endpoint == endpointResponses {
		r, ok = responsesParams[field]
		return r, ok
	}
	own := completionParams
	if endpoint == endpointChat {
		own = chatParams
	}
	if r, ok := own[field]; ok {
		return r, true
	}
	r, ok = commonParams[field]
	return r, ok
}

// checkParams refuses, naming it, the first field (in name order) of body
// that endpoint does not know, or that vigil cannot honour and that does
// not hold a neutral value.
func checkParams(endpoint string, body map[string]json.RawMessage) *apiError {
	for _, field := range slices.Sorted(maps.Keys(body)) {
		raw := bytes.TrimSpace(body[field])
		r, ok := rule(endpoint, field)
		switch {
		case !ok:
			return badRequest(field, "Unrecognized request argument supplied: %s", field)
		case r.taken || r.neutral == nil || isNull(raw) || r.neutral(raw):
			continue
		}
		return badRequest(field, "%s: vigil cannot honour %s = %s; %s", field, field, clip(raw), r.want)
	}
	return nil
}

// clip shortens a JSON value for a message.
func clip(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// oneOf accepts values equal, as JSON, to one of vals.
func oneOf(vals ...string) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var got any
		if json.Unmarshal(raw, &got) != nil {
			return false
		}
		for _, v := range vals {
			var want any
			if err := json.Unmarshal([]byte(v), &want); err != nil {
				panic(fmt.Sprintf("router: bad neutral value %s: %v", v, err))
			}
			if jsonEqual(got, want) {
				return true
			}
		}
		return false
	}
}

// isNumber accepts the number x, written in any form (0, 0.0, -0).
func isNumber(x float64) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var f float64
		return json.Unmarshal(raw, &f) == nil && f == x
	}
}

func jsonEqual(a, b any) bool {
	da, _ := json.Marshal(a) // maps marshal with sorted keys
	db, _ := json.Marshal(b)
	return bytes.Equal(da, db)
}
