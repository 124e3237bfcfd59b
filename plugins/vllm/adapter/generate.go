package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// abortTimeout bounds the Abort sent for a cancelled request.
const abortTimeout = 2 * time.Second

var _ sdk.Generator = (*Adapter)(nil)

// Generate maps req onto vllm.Inference/GenerateStream (vLLM's vllm.proto:
// GenerateRequest with sampling in RandomSampling, stopping in
// StoppingCriteria, token ids in the response only when
// ResponseOptions.output_token_ids is set) and streams the output. The first
// response carries prompt_info; the last one of the sequence carries
// finish_info with num_output_tokens and the finish reason.
func (a *Adapter) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	conn := a.connection()
	if conn == nil {
		return sdk.Result{}, fmt.Errorf("%w: Generate before Start", sdk.ErrNotStarted)
	}
	stream, err := vllmpb.NewInferenceClient(conn).GenerateStream(ctx, toVLLM(req))
	if err != nil {
		return sdk.Result{}, classify(err, false)
	}
	var res sdk.Result
	sent := false
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if res.FinishReason == sdk.FinishUnknown {
				return res, fmt.Errorf("vLLM ended request %s without finish_info", req.RequestID)
			}
			return res, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				a.abort(ctx, req.RequestID)
				return res, ctx.Err()
			}
			return res, classify(err, sent)
		}
		if pi := msg.GetPromptInfo(); pi != nil {
			res.PromptTokens = pi.GetNumPromptTokens()
		}
		out := msg.GetOutputs()
		if len(out.GetTokenIds()) > 0 || out.GetText() != "" {
			if err := send(sdk.Chunk{TokenIDs: out.GetTokenIds(), Text: out.GetText()}); err != nil {
				a.abort(ctx, req.RequestID)
				return res, err
			}
			sent = true
		}
		if fi := out.GetFinishInfo(); fi != nil {
			res.CompletionTokens = fi.GetNumOutputTokens()
			res.FinishReason = finishReason(fi.GetFinishReason())
		}
	}
}

// Abort calls vllm.Control/Abort.
func (a *Adapter) Abort(ctx context.Context, requestIDs []string) error {
	conn := a.connection()
	if conn == nil {
		return fmt.Errorf("%w: Abort before Start", sdk.ErrNotStarted)
	}
	if _, err := vllmpb.NewControlClient(conn).Abort(ctx, &vllmpb.AbortRequest{RequestIds: requestIDs}); err != nil {
		return classify(err, false)
	}
	return nil
}

// abort ends an engine request whose caller went away. Cancelling the
// stream alone may leave vLLM generating until its next output, so the
// request is aborted by id, on a context that outlives the cancelled one.
func (a *Adapter) abort(ctx context.Context, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_ = a.Abort(actx, []string{id}) // best effort: the engine may be gone
}

func toVLLM(r sdk.GenerateRequest) *vllmpb.GenerateRequest {
	v := &vllmpb.GenerateRequest{
		RequestId:   r.RequestID,
		Temperature: r.Temperature,
		Sampling:    &vllmpb.RandomSampling{Seed: r.Seed},
		Stopping: &vllmpb.StoppingCriteria{
			MaxNewTokens: r.MaxTokens,
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

// classify maps a vLLM error to the sdk's classes. Before any output an
// unavailable engine or a rejected field keeps its class, so the host can
// answer UNAVAILABLE (retry elsewhere) or INVALID_ARGUMENT.
func classify(err error, started bool) error {
	st, _ := status.FromError(err)
	switch {
	case started:
		return fmt.Errorf("vLLM request failed mid-stream: %s", st.Message())
	case st.Code() == codes.InvalidArgument:
		return fmt.Errorf("%w: vLLM rejected the request: %s", sdk.ErrInvalidArgument, st.Message())
	case st.Code() == codes.Unavailable, st.Code() == codes.ResourceExhausted:
		return fmt.Errorf("%w: vLLM: %s", sdk.ErrUnavailable, st.Message())
	}
	return fmt.Errorf("vLLM request failed: %s: %s", st.Code(), st.Message())
}
