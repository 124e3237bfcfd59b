package toy

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/examples/adapter/toypb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Generate maps req onto EngineService/Generate and relays its output with
// the kit's Relay, which aborts the engine request when ctx ends or send
// fails and classifies the engine's errors (UNAVAILABLE while paused is
// sdk.ErrUnavailable). The toy engine has no sampling: the sampling and stop
// fields are ignored. It ends where its prompt ends, so IgnoreEOS is
// refused, naming the field first (ignore_eos:), which lets vigil's router
// name the client's field.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if req.IgnoreEOS {
		return sdk.Result{}, fmt.Errorf("%w: ignore_eos: the toy engine ends where its prompt ends", sdk.ErrInvalidArgument)
	}
	conn, err := a.Conn()
	if err != nil {
		return sdk.Result{}, err
	}
	client := toypb.NewEngineServiceClient(conn)
	wire := &toypb.GenerateRequest{RequestId: req.RequestID, Text: req.Text, TokenIds: req.TokenIDs, MaxTokens: req.MaxTokens}
	if wire.MaxTokens == 0 {
		a.mu.Lock()
		wire.MaxTokens = a.maxTokens
		a.mu.Unlock()
	}
	return adapterkit.Relay(ctx, adapterkit.Generation[toypb.GenerateResponse]{
		Engine:    engine,
		RequestID: req.RequestID,
		Open: func(ctx context.Context) (adapterkit.Stream[toypb.GenerateResponse], error) {
			return client.Generate(ctx, wire)
		},
		Next: func(msg *toypb.GenerateResponse, res *sdk.Result) sdk.Chunk {
			if r := msg.GetFinishReason(); r != toypb.FinishReason_FINISH_REASON_UNSPECIFIED {
				res.FinishReason = finishReason(r)
				res.PromptTokens, res.CompletionTokens = msg.GetPromptTokens(), msg.GetCompletionTokens()
			}
			return sdk.Chunk{TokenIDs: msg.GetTokenIds(), Text: msg.GetText()}
		},
		Abort:    func(ctx context.Context, id string) error { return a.Abort(ctx, []string{id}) },
		InFlight: a.InFlight(),
	}, send)
}

// Abort calls EngineService/Abort.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	conn, err := a.Conn()
	if err != nil {
		return err
	}
	if _, err := toypb.NewEngineServiceClient(conn).Abort(ctx, &toypb.AbortRequest{RequestIds: requestIDs}); err != nil {
		return adapterkit.Classify(engine, err, false)
	}
	return nil
}

func finishReason(r toypb.FinishReason) sdk.FinishReason {
	switch r {
	case toypb.FinishReason_FINISH_REASON_STOP:
		return sdk.FinishStop
	case toypb.FinishReason_FINISH_REASON_LENGTH:
		return sdk.FinishLength
	case toypb.FinishReason_FINISH_REASON_ABORTED:
		return sdk.FinishCancelled
	}
	return sdk.FinishError
}
