package vllm

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Generate maps req onto vllm.Inference/GenerateStream (vLLM's vllm.proto:
// GenerateRequest with sampling in RandomSampling, stopping in
// StoppingCriteria, token ids in the response only when
// ResponseOptions.output_token_ids is set) and relays the output. The first
// response carries prompt_info; the last one of the sequence carries
// finish_info with num_output_tokens and the finish reason.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	conn, err := a.Conn()
	if err != nil {
		return sdk.Result{}, err
	}
	wire, err := toVLLM(req)
	if err != nil {
		return sdk.Result{}, err
	}
	return adapterkit.Relay(ctx, adapterkit.Generation[vllmpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[vllmpb.GenerateResponse], error) {
			return vllmpb.NewInferenceClient(conn).GenerateStream(ctx, wire)
		},
		Next:     next,
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// next maps one GenerateResponse.
func next(msg *vllmpb.GenerateResponse, res *sdk.Result) sdk.Chunk {
	var c sdk.Chunk
	if pi := msg.GetPromptInfo(); pi != nil {
		res.PromptTokens = pi.GetNumPromptTokens()
		c.PromptLogprobs = promptLogprobs(pi)
	}
	out := msg.GetOutputs()
	if fi := out.GetFinishInfo(); fi != nil {
		res.CompletionTokens = fi.GetNumOutputTokens()
		res.FinishReason = finishReason(fi.GetFinishReason())
		res.CachedTokens = fi.GetNumCachedTokens()
	}
	c.TokenIDs, c.Text = out.GetTokenIds(), out.GetText()
	c.Logprobs = tokenLogprobs(c.TokenIDs, out.GetLogprobs(), out.GetRanks(), out.GetCandidateTokens())
	return c
}

// Abort calls vllm.Control/Abort.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	conn, err := a.Conn()
	if err != nil {
		return err
	}
	if _, err := vllmpb.NewControlClient(conn).Abort(ctx, &vllmpb.AbortRequest{RequestIds: requestIDs}); err != nil {
		return adapterkit.Classify(engine, err, false)
	}
	return nil
}

func toVLLM(r sdk.GenerateRequest) (*vllmpb.GenerateRequest, error) {
	decoding, err := toDecoding(r)
	if err != nil {
		return nil, err
	}
	v := &vllmpb.GenerateRequest{
		Decoding:    decoding,
		RequestId:   r.RequestID,
		Temperature: r.Temperature,
		Sampling:    &vllmpb.RandomSampling{Seed: r.Seed, MinP: r.MinP},
		Stopping: &vllmpb.StoppingCriteria{
			MaxNewTokens: r.MaxTokens,
			MinNewTokens: r.MinTokens,
			StopTokenIds: r.StopTokenIDs,
			StopStrings:  r.Stop,
			IgnoreEos:    r.IgnoreEOS,
		},
		Response: &vllmpb.ResponseOptions{OutputTokenIds: true},
	}
	setLogprobs(v.Response, r.Logprobs)
	if r.TopP != nil {
		v.Sampling.TopP = *r.TopP
	}
	if r.TopK != nil {
		v.Sampling.TopK = *r.TopK
	}
	if r.TokenIDs != nil {
		v.Prompt = &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: r.TokenIDs}}
	} else {
		v.Prompt = &vllmpb.GenerateRequest_Text{Text: r.Text}
	}
	return v, nil
}

// toDecoding maps the penalties, logit bias and structured output onto
// DecodingParameters; nil when the request sets none of them, as before.
func toDecoding(r sdk.GenerateRequest) (*vllmpb.DecodingParameters, error) {
	d := &vllmpb.DecodingParameters{
		PresencePenalty:  r.PresencePenalty,
		FrequencyPenalty: r.FrequencyPenalty,
		LogitBias:        r.LogitBias,
	}
	if p := r.RepetitionPenalty; p != nil {
		if *p <= 0 {
			// vLLM reads 0 as unset: a penalty of 0 would be dropped.
			return nil, fmt.Errorf("%w: repetition_penalty: %v; vLLM takes a penalty above 0", sdk.ErrInvalidArgument, *p)
		}
		d.RepetitionPenalty = *p
	}
	if o := r.StructuredOutput; o != nil {
		if err := setStructured(d, o); err != nil {
			return nil, err
		}
	}
	if proto.Equal(d, &vllmpb.DecodingParameters{}) {
		return nil, nil
	}
	return d, nil
}

// grammarDialects are the dialects vLLM takes in DecodingParameters.grammar,
// telling them apart itself: a "::=" rule is EBNF, as xgrammar reads it;
// otherwise Lark, which vLLM converts to EBNF for xgrammar and llguidance
// reads as it is.
var grammarDialects = []string{"ebnf", "lark"}

// setStructured maps a constraint onto d's structured_output oneof.
func setStructured(d *vllmpb.DecodingParameters, o *sdk.StructuredOutput) error {
	switch o.Kind {
	case sdk.StructuredJSONObject:
		d.StructuredOutput = &vllmpb.DecodingParameters_JsonObject{JsonObject: true}
	case sdk.StructuredJSONSchema:
		d.StructuredOutput = &vllmpb.DecodingParameters_Json{Json: o.Text}
	case sdk.StructuredRegex:
		d.StructuredOutput = &vllmpb.DecodingParameters_Regex{Regex: o.Text}
	case sdk.StructuredChoice:
		d.StructuredOutput = &vllmpb.DecodingParameters_Choice{Choice: &vllmpb.DecodingParameters_StringChoices{Choices: o.Choices}}
	case sdk.StructuredGrammar:
		if !slices.Contains(grammarDialects, o.Dialect) {
			return fmt.Errorf("%w: grammar: dialect %q; vLLM takes ebnf or lark", sdk.ErrInvalidArgument, o.Dialect)
		}
		d.StructuredOutput = &vllmpb.DecodingParameters_Grammar{Grammar: o.Text}
	case sdk.StructuredTag:
		d.StructuredOutput = &vllmpb.DecodingParameters_StructuralTag{StructuralTag: o.Text}
	default:
		return fmt.Errorf("%w: structured output: kind %d is not one vLLM takes", sdk.ErrInvalidArgument, o.Kind)
	}
	return nil
}

func finishReason(r vllmpb.FinishInfo_FinishReason) sdk.FinishReason {
	switch r {
	case vllmpb.FinishInfo_STOP:
		return sdk.FinishStop
	case vllmpb.FinishInfo_LENGTH:
		return sdk.FinishLength
	case vllmpb.FinishInfo_ABORTED:
		return sdk.FinishCancelled
	default:
		return sdk.FinishUnknown
	}
}
