package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// prompt is the same three token ids on both paths, so that the mock does
// the same work whether vigil forwards the request or the bench sends it.
var prompt = []uint32{1, 2, 3}

// Dial opens one client connection to a loopback gRPC server; all streams
// of a row share it, on both paths, as a router's would.
func Dial(target string) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", target, err)
	}
	return cc, nil
}

// Worker sends Generate requests to a vigil worker (or router) endpoint.
//
// Worker and the Direct* requests are B5's reference client: plain grpc-go
// stream readers, each one Recv loop (drain) counting tokens, so that
// vigil's CPU is compared with what reading the same tokens straight from
// the engine costs.
func Worker(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	c := workerv1.NewWorkerClient(cc)
	return func(ctx context.Context, id string) Outcome {
		stream, err := c.Generate(ctx, &workerv1.GenerateRequest{
			RequestId: id,
			Prompt:    &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: prompt}},
			Stopping:  &workerv1.Stopping{MaxTokens: maxTokens},
		})
		if err != nil {
			return Outcome{Err: err}
		}
		return drain(ctx, func() (int, error) {
			msg, err := stream.Recv()
			if f := msg.GetFinal(); f != nil && f.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_ERROR {
				return 0, fmt.Errorf("final: %s", f.GetDescription())
			}
			return len(msg.GetChunk().GetTokenIds()), err
		})
	}
}

// DirectVLLM sends GenerateStream requests straight to a vLLM engine (the
// mock), with the options vigil's vLLM adapter sets.
func DirectVLLM(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	return directVLLM(cc, maxTokens, false)
}

// directVLLM is DirectVLLM; with stamps, each message's engine→client
// time goes to Outcome.Paths (StampedVLLM).
func directVLLM(cc grpc.ClientConnInterface, maxTokens uint32, stamps bool) Request {
	c := vllmpb.NewInferenceClient(cc)
	return func(ctx context.Context, id string) Outcome {
		stream, err := c.GenerateStream(ctx, &vllmpb.GenerateRequest{
			RequestId: id,
			Prompt:    &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: prompt}},
			Sampling:  &vllmpb.RandomSampling{},
			Stopping:  &vllmpb.StoppingCriteria{MaxNewTokens: maxTokens},
			Response:  &vllmpb.ResponseOptions{OutputTokenIds: true},
		})
		if err != nil {
			return Outcome{Err: err}
		}
		var paths []Path
		out := drain(ctx, func() (int, error) {
			msg, err := stream.Recv()
			ids := msg.GetOutputs().GetTokenIds()
			if stamps {
				paths = stamped(paths, ids)
			}
			return len(ids), err
		})
		out.Paths = paths
		return out
	}
}

// DirectSGLang sends Generate requests straight to an SGLang engine (the
// mock), with the fields vigil's SGLang adapter sets.
func DirectSGLang(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	return directSGLang(cc, maxTokens, false)
}

// directSGLang is DirectSGLang; with stamps, each message's engine→client
// time goes to Outcome.Paths (StampedSGLang).
func directSGLang(cc grpc.ClientConnInterface, maxTokens uint32, stamps bool) Request {
	c := sglangpb.NewSglangServiceClient(cc)
	ids := make([]int32, len(prompt))
	for i, id := range prompt {
		ids[i] = int32(id)
	}
	maxNew, stream := int32(maxTokens), true
	return func(ctx context.Context, id string) Outcome {
		s, err := c.Generate(ctx, &sglangpb.GenerateRequest{
			InputIds:       ids,
			SamplingParams: &sglangpb.SamplingParams{MaxNewTokens: &maxNew},
			Stream:         &stream,
			Rid:            &id,
		})
		if err != nil {
			return Outcome{Err: err}
		}
		var paths []Path
		out := drain(ctx, func() (int, error) {
			msg, err := s.Recv()
			if out := msg.GetOutputIds(); stamps && len(out) > 0 {
				paths = stamped(paths, []uint32{uint32(out[0])})
			}
			return len(msg.GetOutputIds()), err
		})
		out.Paths = paths
		return out
	}
}

// drain reads messages with recv, which returns the number of tokens in
// one message, until the stream ends. In a run with a measuring window
// (Config.Warmup), ctx carries the stream's counter of tokens received,
// which drain adds each message's to.
func drain(ctx context.Context, recv func() (int, error)) Outcome {
	var out Outcome
	c, _ := ctx.Value(counterKey{}).(*atomic.Int64)
	for {
		n, err := recv()
		if n > 0 {
			if out.First.IsZero() {
				out.First = time.Now()
			}
			out.Tokens += n
			if c != nil {
				c.Add(int64(n))
			}
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.Err = err
			return out
		}
	}
}
