package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Generate maps req onto SglangService/Generate (token ids in, token ids
// out: SGLang takes no text) and relays the output. Usage and the finish
// reason come from meta_info on the message with finished true. On an
// older server it fails with sdk.ErrUnavailable: requests need the current
// API.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	client, err := a.client()
	if err != nil {
		return sdk.Result{}, err
	}
	wire, err := toSGLang(req, a.currentLayout())
	if err != nil {
		return sdk.Result{}, err
	}
	return adapterkit.Relay(ctx, adapterkit.Generation[sglangpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[sglangpb.GenerateResponse], error) {
			return client.Generate(ctx, wire)
		},
		Next:     nextFor(req),
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// Abort calls SglangService/Abort for each id. An older server has taken
// no request through vigil, so every id is unknown to it: there is nothing
// to abort, and unknown ids are ignored.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	client, err := a.client()
	if errors.Is(err, errOlderAPI) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, id := range requestIDs {
		if _, err := client.Abort(ctx, &sglangpb.AbortRequest{Rid: id}); err != nil {
			return adapterkit.Classify(engine, err, false)
		}
	}
	return nil
}

// errOlderAPI is client's error on an older server.
var errOlderAPI = fmt.Errorf("%w: the SGLang engine serves the older %s API, which takes no requests through vigil; requests need sglang.runtime.v1", sdk.ErrUnavailable, SchedulerService)

// client is the SglangService client after Start, on the current API.
func (a *Adapter) client() (sglangpb.SglangServiceClient, error) {
	conn, err := a.Conn()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	api := a.api
	a.mu.Unlock()
	if api == apiScheduler {
		return nil, errOlderAPI
	}
	return sglangpb.NewSglangServiceClient(conn), nil
}

// accepts is what the engine takes beyond the basic request, in layout
// (sdk.Worker.Accepts). Neither layout lists stop (SGLang's gRPC server
// runs without a tokenizer and refuses stop strings: the host matches them
// when it has one), n (GenerateResponse tells no sequence apart: the host
// fans out), logit_bias or json_object (none in SGLang; the host sends the
// schema {"type":"object"}). Both list logprobs (MaxLogprobs).
func accepts(layout string) []string {
	names := []string{"frequency_penalty", "ignore_eos", "json_schema", "min_p", "min_tokens", "presence_penalty", "regex", "repetition_penalty", "top_k",
		fmt.Sprintf("logprobs=%d", MaxLogprobs), fmt.Sprintf("prompt_logprobs=%d", MaxLogprobs)}
	if layout == layoutNew {
		names = append(names, "choice", "grammar.ebnf", "seed", "structural_tag")
	}
	return names
}

// toSGLang maps req onto a GenerateRequest in layout, refusing what that
// layout has no field for rather than dropping it.
func toSGLang(r sdk.GenerateRequest, layout string) (*sglangpb.GenerateRequest, error) {
	if r.TokenIDs == nil {
		return nil, fmt.Errorf("%w: prompt: SGLang takes token ids only, not text", sdk.ErrInvalidArgument)
	}
	ids, err := int32s("prompt", r.TokenIDs)
	if err != nil {
		return nil, err
	}
	p, err := sampling(r, layout)
	if err != nil {
		return nil, err
	}
	if err := structured(p, r.StructuredOutput, layout); err != nil {
		return nil, err
	}
	stream := true
	w := &sglangpb.GenerateRequest{InputIds: ids, SamplingParams: p, Stream: &stream, Rid: &r.RequestID}
	return w, setLogprobs(w, r.Logprobs)
}

// sampling maps the sampling and stopping fields.
func sampling(r sdk.GenerateRequest, layout string) (*sglangpb.SamplingParams, error) {
	if err := refuseUnsupported(r, layout); err != nil {
		return nil, err
	}
	stops, err := int32s("stop_token_ids", r.StopTokenIDs)
	if err != nil {
		return nil, err
	}
	p := &sglangpb.SamplingParams{Temperature: r.Temperature, TopP: r.TopP, StopTokenIds: stops, RepetitionPenalty: r.RepetitionPenalty, Seed: r.Seed}
	for _, c := range []struct {
		field string
		v     *uint32
		to    **int32
	}{{"top_k", r.TopK, &p.TopK}, {"max_tokens", nonZero(r.MaxTokens), &p.MaxNewTokens}, {"min_tokens", nonZero(r.MinTokens), &p.MinNewTokens}} {
		if c.v == nil {
			continue
		}
		n, err := int32s(c.field, []uint32{*c.v})
		if err != nil {
			return nil, err
		}
		*c.to = &n[0]
	}
	if r.IgnoreEOS {
		p.IgnoreEos = &r.IgnoreEOS
	}
	p.MinP = nonZero(r.MinP)
	p.PresencePenalty = nonZero(r.PresencePenalty)
	p.FrequencyPenalty = nonZero(r.FrequencyPenalty)
	return p, nil
}

// refuseUnsupported refuses the fields SGLang, or this layout, has none
// for: not a silent drop, a client must learn it does not get them.
func refuseUnsupported(r sdk.GenerateRequest, layout string) error {
	switch {
	case len(r.Stop) > 0:
		return fmt.Errorf("%w: stop: SGLang's gRPC server runs without a tokenizer and refuses stop strings; vigil matches them itself only with a tokenizer (--tokenizer-dir)", sdk.ErrInvalidArgument)
	case len(r.LogitBias) > 0:
		return fmt.Errorf("%w: logit_bias: SGLang's generate API (sglang.runtime.v1 SamplingParams) has no logit bias", sdk.ErrInvalidArgument)
	case r.Seed != nil && layout != layoutNew:
		return fmt.Errorf("%w: seed: SGLang's released sglang.runtime.v1 layout takes no sampling seed (the newer one does: --engine-option %s=%s)", sdk.ErrInvalidArgument, OptionLayout, layoutNew)
	}
	return nil
}

// structured maps the output constraint: json_schema 14 and regex 15 in
// the released layout, guided_decoding 17 in the new one, which alone has
// choice, EBNF and structural tags.
func structured(p *sglangpb.SamplingParams, o *sdk.StructuredOutput, layout string) error {
	if o == nil {
		return nil
	}
	g := &sglangpb.GuidedDecoding{}
	name := ""
	switch o.Kind {
	case sdk.StructuredJSONSchema:
		g.Constraint = &sglangpb.GuidedDecoding_JsonSchema{JsonSchema: o.Text}
	case sdk.StructuredRegex:
		g.Constraint = &sglangpb.GuidedDecoding_Regex{Regex: o.Text}
	case sdk.StructuredChoice:
		g.Constraint, name = &sglangpb.GuidedDecoding_Choice{Choice: &sglangpb.ChoiceConstraint{Values: o.Choices}}, "choice"
	case sdk.StructuredGrammar:
		if o.Dialect != "ebnf" {
			return fmt.Errorf("%w: grammar.%s: SGLang takes EBNF grammars only", sdk.ErrInvalidArgument, o.Dialect)
		}
		g.Constraint, name = &sglangpb.GuidedDecoding_Ebnf{Ebnf: o.Text}, "grammar.ebnf"
	case sdk.StructuredTag:
		g.Constraint, name = &sglangpb.GuidedDecoding_StructuralTag{StructuralTag: o.Text}, "structural_tag"
	case sdk.StructuredJSONObject:
		return fmt.Errorf("%w: json_object: SGLang has no JSON-object mode; send the schema {\"type\":\"object\"}", sdk.ErrInvalidArgument)
	default:
		return fmt.Errorf("%w: structured output of kind %d: unknown to this adapter", sdk.ErrInvalidArgument, o.Kind)
	}
	switch {
	case layout == layoutNew:
		p.GuidedDecoding = g
	case name != "":
		return fmt.Errorf("%w: %s: SGLang's released sglang.runtime.v1 layout guides by json_schema and regex only (the newer one takes it: --engine-option %s=%s)", sdk.ErrInvalidArgument, name, OptionLayout, layoutNew)
	case o.Kind == sdk.StructuredJSONSchema:
		p.JsonSchema = &o.Text
	default:
		p.Regex = &o.Text
	}
	return nil
}

// nonZero is a pointer to v, nil for 0: SGLang's unset.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// int32s converts token ids and counts to SGLang's int32, naming the field
// of a value that does not fit.
func int32s(field string, v []uint32) ([]int32, error) {
	if v == nil {
		return nil, nil
	}
	out := make([]int32, len(v))
	for i, x := range v {
		if x > math.MaxInt32 {
			return nil, fmt.Errorf("%w: %s: %d is above SGLang's limit %d", sdk.ErrInvalidArgument, field, x, math.MaxInt32)
		}
		out[i] = int32(x)
	}
	return out, nil
}

// nextFor is next for req, with the logprobs it asks.
func nextFor(req sdk.GenerateRequest) func(*sglangpb.GenerateResponse, *sdk.Result) sdk.Chunk {
	return func(msg *sglangpb.GenerateResponse, res *sdk.Result) sdk.Chunk { return next(msg, res, req) }
}

// next maps one GenerateResponse: its new token ids and, when req asks,
// their logprobs from meta_info; on the last message the usage, the
// finish reason and the prompt's logprobs.
func next(msg *sglangpb.GenerateResponse, res *sdk.Result, req sdk.GenerateRequest) sdk.Chunk {
	c := sdk.Chunk{TokenIDs: make([]uint32, len(msg.GetOutputIds()))}
	for i, id := range msg.GetOutputIds() {
		c.TokenIDs[i] = uint32(id)
	}
	meta, lp := msg.GetMetaInfo(), req.Logprobs
	if lp != nil && lp.Output {
		c.Logprobs = metaLogprobs(meta, "output", lp.Top)
	}
	if msg.GetFinished() {
		res.PromptTokens = count(meta["prompt_tokens"])
		res.CompletionTokens = count(meta["completion_tokens"])
		res.CachedTokens = count(meta["cached_tokens"])
		res.FinishReason = finishReason(meta["finish_reason"])
		if lp != nil && lp.Prompt {
			c.PromptLogprobs = promptLogprobs(meta, req.TokenIDs, lp.PromptTop)
		}
	}
	return c
}

// count reads a decimal count; anything else is 0, unknown.
func count(s string) uint32 {
	n, _ := strconv.ParseUint(s, 10, 32)
	return uint32(n)
}

// finishReason reads meta_info's finish_reason, a JSON object whose type is
// "stop", "length" or "abort". A finished message without one is an
// engine error.
func finishReason(s string) sdk.FinishReason {
	var fr struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(s), &fr) != nil {
		return sdk.FinishError
	}
	switch fr.Type {
	case "stop":
		return sdk.FinishStop
	case "length":
		return sdk.FinishLength
	case "abort":
		return sdk.FinishCancelled
	}
	return sdk.FinishError
}
