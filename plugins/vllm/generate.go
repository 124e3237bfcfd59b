package vllm

import (
	"context"

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
	return adapterkit.Relay(ctx, adapterkit.Generation[vllmpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[vllmpb.GenerateResponse], error) {
			return vllmpb.NewInferenceClient(conn).GenerateStream(ctx, toVLLM(req))
		},
		Next:     next,
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// next maps one GenerateResponse.
func next(msg *vllmpb.GenerateResponse, res *sdk.Result) sdk.Chunk {
	if pi := msg.GetPromptInfo(); pi != nil {
		res.PromptTokens = pi.GetNumPromptTokens()
	}
	out := msg.GetOutputs()
	if fi := out.GetFinishInfo(); fi != nil {
		res.CompletionTokens = fi.GetNumOutputTokens()
		res.FinishReason = finishReason(fi.GetFinishReason())
	}
	return sdk.Chunk{TokenIDs: out.GetTokenIds(), Text: out.GetText()}
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

func toVLLM(r sdk.GenerateRequest) *vllmpb.GenerateRequest {
	v := &vllmpb.GenerateRequest{
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
	return v
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
