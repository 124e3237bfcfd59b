package endpoint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lacks refuses a field the worker does not take: field is its path in
// the request, param the OpenAI (or vLLM) parameter a client sent.
func lacks(field, param string) error {
	return status.Errorf(codes.InvalidArgument, "%s: this worker does not take %s (its engine has no such field, and it is not among the worker's capabilities, discovery metadata caps); omit it", field, param)
}

// errStopNoTokenizer refuses stop strings on a worker whose engine does
// not match them and that has no tokenizer to match them itself.
var errStopNoTokenizer = status.Error(codes.InvalidArgument, "stopping.stop: this worker's engine does not match stop strings on token ids, "+
	"and vigil has no tokenizer to match them itself; start vigil run with --tokenizer-dir DIR, or omit stop")

// errEchoNoTokenizer refuses return_prompt without a tokenizer.
var errEchoNoTokenizer = status.Error(codes.InvalidArgument, "return_prompt (echo): this worker has no tokenizer to give the prompt's "+
	"token ids and text; start vigil run with --tokenizer-dir DIR, or omit echo")

// checkTaken refuses, naming it, a field set in req that the worker does
// not take.
func checkTaken(req *workerv1.GenerateRequest, a accepts) error {
	s, st := req.GetSampling(), req.GetStopping()
	for _, f := range []struct {
		set         bool
		name, field string
	}{
		{s.GetTopK() != 0, discovery.CapTopK, "sampling.top_k"},
		{s != nil && s.Seed != nil, discovery.CapSeed, "sampling.seed"},
		{s.GetMinP() != 0, discovery.CapMinP, "sampling.min_p"},
		{s.GetPresencePenalty() != 0, discovery.CapPresencePenalty, "sampling.presence_penalty"},
		{s.GetFrequencyPenalty() != 0, discovery.CapFrequencyPenalty, "sampling.frequency_penalty"},
		{s != nil && s.RepetitionPenalty != nil && *s.RepetitionPenalty != 1, discovery.CapRepetitionPenalty, "sampling.repetition_penalty"},
		{len(s.GetLogitBias()) > 0, discovery.CapLogitBias, "sampling.logit_bias"},
		{st.GetMinTokens() != 0, discovery.CapMinTokens, "stopping.min_tokens"},
		{st.GetIgnoreEos(), discovery.CapIgnoreEOS, "stopping.ignore_eos"},
	} {
		if f.set && !a.takes(f.name) {
			return lacks(f.field, f.name)
		}
	}
	if len(st.GetStop()) > 0 && !a.takes(discovery.CapStop) {
		return errStopNoTokenizer
	}
	if req.GetReturnPrompt() && !a.takes(discovery.CapPromptTokenIDs) {
		return errEchoNoTokenizer
	}
	if err := checkLater(req, a); err != nil {
		return err
	}
	if err := checkLogprobs(req.GetLogprobs(), a); err != nil {
		return err
	}
	return checkSamplingRanges(s)
}

// checkLater refuses, naming them, the fields of this round's worker API
// that later issues implement (docs/worker-api.md): this worker lists no
// capability for them, so a router sends none.
func checkLater(req *workerv1.GenerateRequest, a accepts) error {
	chat := req.GetMessages()
	switch {
	case req.GetResume() != nil && !a.takes(discovery.CapResume):
		return lacks("resume", "a resumed stream")
	case a.takes(discovery.CapTools):
		return nil
	case chat.GetTools() != "" || chat.GetToolChoice() != nil:
		return lacks("prompt.messages.tools", "tools")
	}
	for i, m := range chat.GetMessages() {
		if len(m.GetToolCalls()) > 0 {
			return lacks(fmt.Sprintf("prompt.messages[%d].tool_calls", i), "tools")
		}
	}
	return nil
}

// checkSamplingRanges checks the ranges of the penalties and biases.
func checkSamplingRanges(s *workerv1.Sampling) error {
	for _, p := range []struct {
		v    float32
		name string
	}{{s.GetPresencePenalty(), "presence_penalty"}, {s.GetFrequencyPenalty(), "frequency_penalty"}} {
		if !(p.v >= -2 && p.v <= 2) {
			return status.Errorf(codes.InvalidArgument, "sampling.%s: %g: must be in [-2, 2]", p.name, p.v)
		}
	}
	if r := s.GetRepetitionPenalty(); s != nil && s.RepetitionPenalty != nil && !(r > 0) {
		return status.Errorf(codes.InvalidArgument, "sampling.repetition_penalty: %g: must be more than 0", r)
	}
	for id, b := range s.GetLogitBias() {
		if !(b >= -100 && b <= 100) {
			return status.Errorf(codes.InvalidArgument, "sampling.logit_bias: token %d: %g: a bias must be in [-100, 100]", id, b)
		}
	}
	return nil
}

// jsonObjectSchema is json_object for an engine that takes only schemas.
const jsonObjectSchema = `{"type":"object"}`

// structured maps req's structured output onto the engine's kinds, with
// vigil's fallbacks (choice as a regex, json_object as a schema); nil for
// none. Errors name the field and the parameter a client sent.
func structured(o *workerv1.StructuredOutput, a accepts) (*sdk.StructuredOutput, error) {
	switch k := o.GetKind().(type) {
	case nil:
		return nil, nil
	case *workerv1.StructuredOutput_JsonObject:
		switch {
		case !k.JsonObject:
			return nil, status.Error(codes.InvalidArgument, "structured_output.json_object: must be true when set")
		case a.engine[discovery.CapJSONObject]:
			return &sdk.StructuredOutput{Kind: sdk.StructuredJSONObject}, nil
		case a.engine[discovery.CapJSONSchema]:
			return &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: jsonObjectSchema}, nil
		}
		return nil, lacks("structured_output.json_object", "response_format json_object")
	case *workerv1.StructuredOutput_JsonSchema:
		return jsonSchema(k.JsonSchema, a)
	case *workerv1.StructuredOutput_Regex:
		return textKind(sdk.StructuredRegex, k.Regex, discovery.CapRegex, "structured_output.regex", "guided_regex (structured_outputs.regex)", a)
	case *workerv1.StructuredOutput_Choice:
		return choice(k.Choice.GetChoices(), a)
	case *workerv1.StructuredOutput_Grammar:
		return grammar(k.Grammar, a)
	case *workerv1.StructuredOutput_StructuralTag:
		return textKind(sdk.StructuredTag, k.StructuralTag, discovery.CapStructuralTag, "structured_output.structural_tag", "structural_tag", a)
	}
	return nil, status.Error(codes.InvalidArgument, "structured_output: a kind this worker does not know; it takes json_object, json_schema, regex, choice, grammar and structural_tag")
}

// textKind is a kind whose text must not be empty.
func textKind(kind sdk.StructuredKind, text, cap, field, param string, a accepts) (*sdk.StructuredOutput, error) {
	if !a.engine[cap] {
		return nil, lacks(field, param)
	}
	if text == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s: must not be empty", field)
	}
	return &sdk.StructuredOutput{Kind: kind, Text: text}, nil
}

func jsonSchema(s *workerv1.JsonSchema, a accepts) (*sdk.StructuredOutput, error) {
	if !a.engine[discovery.CapJSONSchema] {
		return nil, lacks("structured_output.json_schema", "response_format json_schema")
	}
	text := strings.TrimSpace(s.GetSchema())
	if !strings.HasPrefix(text, "{") || !json.Valid([]byte(text)) {
		return nil, status.Error(codes.InvalidArgument, "structured_output.json_schema.schema: want a JSON schema, a JSON object")
	}
	return &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: s.GetSchema()}, nil
}

// choice is the engine's choice, or an escaped alternation for an engine
// with regexes only (TensorRT-LLM).
func choice(choices []string, a accepts) (*sdk.StructuredOutput, error) {
	if !a.takes(discovery.CapChoice) {
		return nil, lacks("structured_output.choice", "guided_choice (structured_outputs.choice)")
	}
	if len(choices) == 0 {
		return nil, status.Error(codes.InvalidArgument, "structured_output.choice.choices: must list at least one")
	}
	if a.engine[discovery.CapChoice] {
		return &sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: choices}, nil
	}
	return &sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: choiceRegex(choices)}, nil
}

// choiceRegex matches exactly one of choices.
func choiceRegex(choices []string) string {
	quoted := make([]string, len(choices))
	for i, c := range choices {
		quoted[i] = regexp.QuoteMeta(c)
	}
	return "(" + strings.Join(quoted, "|") + ")"
}

func grammar(g *workerv1.Grammar, a accepts) (*sdk.StructuredOutput, error) {
	var dialects []string
	for name := range a.engine {
		if d, ok := strings.CutPrefix(name, grammarPrefix); ok {
			dialects = append(dialects, d)
		}
	}
	if len(dialects) == 0 {
		return nil, lacks("structured_output.grammar", "guided_grammar (structured_outputs.grammar)")
	}
	if !a.engine[grammarPrefix+g.GetDialect()] {
		return nil, status.Errorf(codes.InvalidArgument, "structured_output.grammar.dialect: %q: this worker's engine takes %s", g.GetDialect(), strings.Join(dialects, ", "))
	}
	if g.GetText() == "" {
		return nil, status.Error(codes.InvalidArgument, "structured_output.grammar.text: must not be empty")
	}
	return &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: g.GetDialect(), Text: g.GetText()}, nil
}

// toEngine is req as the adapter takes it, with ids (validate's) as its
// prompt when not nil and so (structured's) as its structured output; the
// fields checkTaken passed.
func toEngine(req *workerv1.GenerateRequest, ids []uint32, engineID string, so *sdk.StructuredOutput) sdk.GenerateRequest {
	st := req.GetStopping()
	r := sdk.GenerateRequest{
		RequestID:        engineID,
		Text:             req.GetText(),
		MaxTokens:        st.GetMaxTokens(),
		StopTokenIDs:     st.GetStopTokenIds(),
		Stop:             st.GetStop(),
		IgnoreEOS:        st.GetIgnoreEos(),
		MinTokens:        st.GetMinTokens(),
		StructuredOutput: so,
		Logprobs:         logprobsToEngine(req.GetLogprobs()),
	}
	if s := req.GetSampling(); s != nil {
		r.Temperature, r.TopP, r.TopK, r.Seed, r.MinP = s.Temperature, s.TopP, s.TopK, s.Seed, s.GetMinP()
		r.PresencePenalty, r.FrequencyPenalty = s.GetPresencePenalty(), s.GetFrequencyPenalty()
		if len(s.GetLogitBias()) > 0 {
			r.LogitBias = s.GetLogitBias()
		}
		if s.RepetitionPenalty != nil && *s.RepetitionPenalty != 1 {
			r.RepetitionPenalty = s.RepetitionPenalty
		}
	}
	if ids != nil {
		r.TokenIDs, r.Text = ids, ""
	}
	return r
}
