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
	var sent int // output tokens sent so far
	return adapterkit.Relay(ctx, adapterkit.Generation[trtllmpb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[trtllmpb.GenerateResponse], error) {
			return client.Generate(ctx, wire)
		},
		Next: func(msg *trtllmpb.GenerateResponse, res *sdk.Result) sdk.Chunk {
			if c := msg.GetChunk(); c != nil {
				sent += len(c.GetTokenIds())
				return sdk.Chunk{TokenIDs: c.GetTokenIds()}
			}
			done := msg.GetComplete()
			res.PromptTokens, res.CompletionTokens = done.GetPromptTokens(), done.GetCompletionTokens()
			res.FinishReason = finishReason(done.GetFinishReason())
			var rest []uint32
			if all := done.GetOutputTokenIds(); len(all) > sent {
				rest = all[sent:]
			}
			return sdk.Chunk{TokenIDs: rest}
		},
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
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
	maxTokens := r.MaxTokens
	if maxTokens == 0 {
		a.mu.Lock()
		maxSeqLen := a.maxSeqLen
		a.mu.Unlock()
		if n := uint32(len(r.TokenIDs)); maxSeqLen > n {
			maxTokens = maxSeqLen - n
		} else {
			return nil, fmt.Errorf("%w: max_tokens: required by TensorRT-LLM, and the model's length is unknown or taken by the prompt", sdk.ErrInvalidArgument)
		}
	}
	if r.MinP != 0 {
		// Not a silent drop, as SGLang's seed: the client asked for a
		// narrower sampling than it would get.
		return nil, fmt.Errorf("%w: min_p: TensorRT-LLM's generate API (trtllm SamplingConfig) has no min_p; send 0 or omit it", sdk.ErrInvalidArgument)
	}
	sc := &trtllmpb.SamplingConfig{Temperature: r.Temperature, TopP: r.TopP}
	if r.MinTokens > 0 {
		sc.MinTokens = &r.MinTokens
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
	return &trtllmpb.GenerateRequest{
		RequestId:      r.RequestID,
		Tokenized:      &trtllmpb.TokenizedInput{InputTokenIds: r.TokenIDs},
		SamplingConfig: sc,
		MaxTokens:      maxTokens,
		Streaming:      true,
		Stop:           r.Stop,
		StopTokenIds:   r.StopTokenIDs,
		IgnoreEos:      r.IgnoreEOS,
	}, nil
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
