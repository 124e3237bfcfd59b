package trtllm

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Generate maps req onto TrtllmService/Generate (token ids in, token ids
// out: TensorRT-LLM takes no text here) and relays the output: each chunk's
// new tokens, then the complete message's finish reason and usage, and any
// of its output tokens no chunk carried. max_tokens is required by the
// server: 0 asks for the rest of the model's length.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	conn, err := a.Conn()
	if err != nil {
		return sdk.Result{}, err
	}
	wire, err := a.toTRT(req)
	if err != nil {
		return sdk.Result{}, err
	}
	client := trtllmpb.NewTrtllmServiceClient(conn)
	r := &relay{req: req}
	return adapterkit.Relay(ctx, adapterkit.Generation[trtllmpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[trtllmpb.GenerateResponse], error) {
			return client.Generate(ctx, wire)
		},
		Next:     r.next,
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// relay maps one request's messages.
type relay struct {
	req  sdk.GenerateRequest
	sent int // output tokens sent so far
}

// next maps a chunk's new tokens and their logprobs; then complete's
// finish reason and usage, any output tokens no chunk carried (and their
// logprobs, from complete's list of all: the rest only, not again), and
// the prompt's logprobs, which come only there.
func (r *relay) next(msg *trtllmpb.GenerateResponse, res *sdk.Result) sdk.Chunk {
	lp := r.req.Logprobs
	output, prompt := lp != nil && lp.Output, lp != nil && lp.Prompt
	if c := msg.GetChunk(); c != nil {
		r.sent += len(c.GetTokenIds())
		out := sdk.Chunk{TokenIDs: c.GetTokenIds()}
		if output {
			out.Logprobs = tokenLogprobs(c.GetLogprobs(), lp.Top)
		}
		return out
	}
	done := msg.GetComplete()
	res.PromptTokens, res.CompletionTokens = done.GetPromptTokens(), done.GetCompletionTokens()
	res.FinishReason = finishReason(done.GetFinishReason())
	res.CachedTokens = done.GetCachedTokens()
	var out sdk.Chunk
	if all := done.GetOutputTokenIds(); len(all) > r.sent {
		out.TokenIDs = all[r.sent:]
		if ls := done.GetLogprobs(); output && len(ls) == len(all) {
			out.Logprobs = tokenLogprobs(ls[r.sent:], lp.Top)
		}
	}
	if prompt {
		out.PromptLogprobs = promptLogprobs(done.GetPromptLogprobs(), r.req.TokenIDs, lp.PromptTop)
	}
	return out
}

// Abort calls TrtllmService/Abort for each id.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	conn, err := a.Conn()
	if err != nil {
		return err
	}
	client := trtllmpb.NewTrtllmServiceClient(conn)
	for _, id := range requestIDs {
		if _, err := client.Abort(ctx, &trtllmpb.AbortRequest{RequestId: id}); err != nil {
			return adapterkit.Classify(engine, err, false)
		}
	}
	return nil
}

func (a *Adapter) toTRT(r sdk.GenerateRequest) (*trtllmpb.GenerateRequest, error) {
	if r.TokenIDs == nil {
		return nil, fmt.Errorf("%w: prompt: TensorRT-LLM takes token ids only, not text", sdk.ErrInvalidArgument)
	}
	maxTokens, err := a.maxTokens(r)
	if err != nil {
		return nil, err
	}
	sc, err := samplingConfig(r)
	if err != nil {
		return nil, err
	}
	guide, err := guidedDecoding(r.StructuredOutput)
	if err != nil {
		return nil, err
	}
	bias, err := a.embeddingBias(r.LogitBias)
	if err != nil {
		return nil, err
	}
	oc, err := outputConfig(r.Logprobs)
	if err != nil {
		return nil, err
	}
	return &trtllmpb.GenerateRequest{
		OutputConfig:   oc,
		RequestId:      r.RequestID,
		Tokenized:      &trtllmpb.TokenizedInput{InputTokenIds: r.TokenIDs},
		SamplingConfig: sc,
		MaxTokens:      maxTokens,
		Streaming:      true,
		GuidedDecoding: guide,
		EmbeddingBias:  bias,
		Stop:           r.Stop,
		StopTokenIds:   r.StopTokenIDs,
		IgnoreEos:      r.IgnoreEOS,
	}, nil
}

// maxTokens is r's max_tokens, which the server requires: 0 asks for the
// rest of the model's length.
func (a *Adapter) maxTokens(r sdk.GenerateRequest) (uint32, error) {
	if r.MaxTokens > 0 {
		return r.MaxTokens, nil
	}
	a.mu.Lock()
	maxSeqLen := a.maxSeqLen
	a.mu.Unlock()
	if n := uint32(len(r.TokenIDs)); maxSeqLen > n {
		return maxSeqLen - n, nil
	}
	return 0, fmt.Errorf("%w: max_tokens: required by TensorRT-LLM, and the model's length is unknown or taken by the prompt", sdk.ErrInvalidArgument)
}

// samplingConfig maps sampling onto SamplingConfig, each optional field
// set only when the request sets it: absent, the server keeps its default
// (repetition_penalty 1.0).
func samplingConfig(r sdk.GenerateRequest) (*trtllmpb.SamplingConfig, error) {
	sc := &trtllmpb.SamplingConfig{Temperature: r.Temperature, TopP: r.TopP, RepetitionPenalty: r.RepetitionPenalty}
	if r.MinTokens > 0 {
		sc.MinTokens = &r.MinTokens
	}
	if r.MinP != 0 {
		sc.MinP = &r.MinP
	}
	if r.PresencePenalty != 0 {
		sc.PresencePenalty = &r.PresencePenalty
	}
	if r.FrequencyPenalty != 0 {
		sc.FrequencyPenalty = &r.FrequencyPenalty
	}
	if r.TopK != nil {
		if *r.TopK > 1<<31-1 {
			return nil, fmt.Errorf("%w: top_k: %d is above TensorRT-LLM's limit", sdk.ErrInvalidArgument, *r.TopK)
		}
		k := int32(*r.TopK)
		sc.TopK = &k
	}
	if r.Seed != nil {
		s := uint64(*r.Seed) // TensorRT-LLM's seed is unsigned: the bits carry over
		sc.Seed = &s
	}
	return sc, nil
}

// guidedDecoding maps a constraint onto GuidedDecodingParams. The server
// applies a guide only when its text is non-empty, so json_object carries
// "{}" (GUIDE_TYPE_JSON ignores it) and an empty schema, regex, grammar or
// tag is refused rather than dropped. There is no choice type: the host
// sends a choice as a regex.
func guidedDecoding(o *sdk.StructuredOutput) (*trtllmpb.GuidedDecodingParams, error) {
	if o == nil {
		return nil, nil
	}
	var t trtllmpb.GuidedDecodingParams_GuideType
	var name string
	switch o.Kind {
	case sdk.StructuredJSONObject:
		return &trtllmpb.GuidedDecodingParams{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON, Guide: "{}"}, nil
	case sdk.StructuredJSONSchema:
		t, name = trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON_SCHEMA, "json_schema"
	case sdk.StructuredRegex:
		t, name = trtllmpb.GuidedDecodingParams_GUIDE_TYPE_REGEX, "regex"
	case sdk.StructuredGrammar:
		if o.Dialect != "ebnf" {
			return nil, fmt.Errorf("%w: grammar: dialect %q; TensorRT-LLM takes ebnf", sdk.ErrInvalidArgument, o.Dialect)
		}
		t, name = trtllmpb.GuidedDecodingParams_GUIDE_TYPE_EBNF_GRAMMAR, "grammar"
	case sdk.StructuredTag:
		t, name = trtllmpb.GuidedDecodingParams_GUIDE_TYPE_STRUCTURAL_TAG, "structural_tag"
	case sdk.StructuredChoice:
		return nil, fmt.Errorf("%w: choice: TensorRT-LLM has no choice guide", sdk.ErrInvalidArgument)
	default:
		return nil, fmt.Errorf("%w: structured output: kind %d is not one TensorRT-LLM takes", sdk.ErrInvalidArgument, o.Kind)
	}
	if o.Text == "" {
		return nil, fmt.Errorf("%w: %s: empty; TensorRT-LLM ignores an empty guide", sdk.ErrInvalidArgument, name)
	}
	return &trtllmpb.GuidedDecodingParams{GuideType: t, Guide: o.Text}, nil
}

// embeddingBias turns logit_bias into TensorRT-LLM's embedding_bias: one
// float per token id of the vocabulary (GetModelInfo's vocab_size), added
// to the logits.
func (a *Adapter) embeddingBias(bias map[uint32]float32) ([]float32, error) {
	if len(bias) == 0 {
		return nil, nil
	}
	a.mu.Lock()
	vocab := a.vocabSize
	a.mu.Unlock()
	if vocab == 0 {
		return nil, fmt.Errorf("%w: logit_bias: TensorRT-LLM reported no vocabulary size to build embedding_bias from", sdk.ErrInvalidArgument)
	}
	out := make([]float32, vocab)
	for id, b := range bias {
		if id >= vocab {
			return nil, fmt.Errorf("%w: logit_bias: token id %d is outside the vocabulary of %d", sdk.ErrInvalidArgument, id, vocab)
		}
		out[id] = b
	}
	return out, nil
}

func finishReason(r string) sdk.FinishReason {
	switch r {
	case "stop", "stop_word":
		return sdk.FinishStop
	case "length":
		return sdk.FinishLength
	}
	return sdk.FinishError
}
