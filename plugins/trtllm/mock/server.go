package mock

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// server serves trtllm.TrtllmService.
type server struct {
	trtllmpb.UnimplementedTrtllmServiceServer
	e *Engine
}

func (s *server) HealthCheck(ctx context.Context, _ *trtllmpb.HealthCheckRequest) (*trtllmpb.HealthCheckResponse, error) {
	if err := s.e.CheckDelay(ctx); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	st, err := s.e.healthStatus(ctx)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return &trtllmpb.HealthCheckResponse{Status: st}, nil
}

func (s *server) GetModelInfo(context.Context, *trtllmpb.GetModelInfoRequest) (*trtllmpb.GetModelInfoResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return &trtllmpb.GetModelInfoResponse{
		ModelId:      s.e.Config().Model,
		MaxInputLen:  int32(s.e.maxInputLen),
		MaxSeqLen:    int32(s.e.maxSeqLen),
		MaxBatchSize: 256,
		VocabSize:    32100, // enginemock.OutputToken's range
	}, nil
}

func (s *server) GetServerInfo(context.Context, *trtllmpb.GetServerInfoRequest) (*trtllmpb.GetServerInfoResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return &trtllmpb.GetServerInfoResponse{
		Version: "1.0.0-mock", Backend: "pytorch",
		TensorParallelSize: 1, PipelineParallelSize: 1, ContextParallelSize: 1, WorldSize: 1,
	}, nil
}

func (s *server) Abort(_ context.Context, req *trtllmpb.AbortRequest) (*trtllmpb.AbortResponse, error) {
	s.e.Abort(req.GetRequestId())
	return &trtllmpb.AbortResponse{Success: true}, nil
}

// Generate streams a chunk per message, then a complete message with every
// output token; an aborted request ends with CANCELLED.
func (s *server) Generate(req *trtllmpb.GenerateRequest, stream grpc.ServerStreamingServer[trtllmpb.GenerateResponse]) error {
	sc := req.GetSamplingConfig()
	gen := enginemock.Request{
		ID:           req.GetRequestId(),
		Prompt:       req.GetTokenized().GetInputTokenIds(),
		Seed:         int64(sc.GetSeed()),
		MaxNewTokens: req.GetMaxTokens(),
		MinNewTokens: sc.GetMinTokens(),
		StopTokenIDs: req.GetStopTokenIds(),
	}
	// TensorRT-LLM's executor refuses a prompt over max_input_len, and
	// shortens max_tokens to what max_seq_len leaves.
	if n := uint32(len(gen.Prompt)); n < s.e.maxSeqLen {
		gen.MaxNewTokens = min(gen.MaxNewTokens, s.e.maxSeqLen-n)
	}
	switch {
	case uint32(len(gen.Prompt)) > s.e.maxInputLen:
		gen.Err = status.Errorf(codes.InvalidArgument, "Prompt length (%d) exceeds maximum input length (%d).", len(gen.Prompt), s.e.maxInputLen)
	case req.GetMaxTokens() == 0:
		gen.Err = status.Error(codes.InvalidArgument, "max_tokens: required, at least 1")
	case sc.GetNumReturnSequences() > 1 || sc.GetBeamWidth() > 1:
		gen.Err = status.Error(codes.InvalidArgument, "sampling_config: the mock engine generates one sequence")
	}
	prompt := uint32(len(gen.Prompt))
	var all []uint32
	return s.e.Generate(stream.Context(), gen, func(c enginemock.Chunk) error {
		all = append(all, c.Tokens...)
		out := uint32(len(all))
		if len(c.Tokens) > 0 {
			chunk := &trtllmpb.GenerateStreamChunk{TokenIds: c.Tokens, PromptTokens: prompt, CompletionTokens: out}
			if err := stream.Send(&trtllmpb.GenerateResponse{RequestId: gen.ID, Response: &trtllmpb.GenerateResponse_Chunk{Chunk: chunk}}); err != nil {
				return err
			}
		}
		f := c.Finish
		if f == nil {
			return nil
		}
		if f.Reason == enginemock.FinishAborted {
			return status.Error(codes.Canceled, "request aborted")
		}
		reason := "length"
		if f.Reason == enginemock.FinishStop {
			reason = "stop"
		}
		done := &trtllmpb.GenerateComplete{OutputTokenIds: all, FinishReason: reason, PromptTokens: prompt, CompletionTokens: out}
		return stream.Send(&trtllmpb.GenerateResponse{RequestId: gen.ID, Response: &trtllmpb.GenerateResponse_Complete{Complete: done}})
	})
}
