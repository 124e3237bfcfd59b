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
		VocabSize:    int32(s.e.vocabSize),
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
	s.e.RecordRequest(req)
	sc := req.GetSamplingConfig()
	gen := enginemock.Request{
		ID:           req.GetRequestId(),
		Prompt:       req.GetTokenized().GetInputTokenIds(),
		Seed:         int64(sc.GetSeed()),
		MaxNewTokens: req.GetMaxTokens(),
		MinNewTokens: sc.GetMinTokens(),
		MinP:         sc.GetMinP(),
		StopTokenIDs: req.GetStopTokenIds(),
	}
	// TensorRT-LLM's executor refuses a prompt over max_input_len, and
	// shortens max_tokens to what max_seq_len leaves.
	if n := uint32(len(gen.Prompt)); n < s.e.maxSeqLen {
		gen.MaxNewTokens = min(gen.MaxNewTokens, s.e.maxSeqLen-n)
	}
	gen.Err = s.refuse(req)
	m := &messages{stream: stream, id: gen.ID, prompt: gen.Prompt, config: req.GetOutputConfig()}
	m.cached = min(s.e.cachedTokens, uint32(len(gen.Prompt)))
	return s.e.Generate(stream.Context(), gen, m.send)
}

// messages formats one generation's chunks as TensorRT-LLM does.
type messages struct {
	stream grpc.ServerStreamingServer[trtllmpb.GenerateResponse]
	id     string
	prompt []uint32
	config *trtllmpb.OutputConfig
	cached uint32
	all    []uint32
}

// send sends a chunk of new tokens (their logprobs when asked), then at
// the finish a complete message with every output token (and all their
// logprobs again) and the prompt's logprobs, asked by prompt_logprobs.
func (m *messages) send(c enginemock.Chunk) error {
	m.all = append(m.all, c.Tokens...)
	prompt, out := uint32(len(m.prompt)), uint32(len(m.all))
	if len(c.Tokens) > 0 {
		chunk := &trtllmpb.GenerateStreamChunk{TokenIds: c.Tokens, PromptTokens: prompt, CompletionTokens: out, CachedTokens: m.cached}
		if m.config.GetLogprobs() > 0 {
			chunk.Logprobs = tokenLogprobs(c.Tokens, m.config.GetLogprobs())
		}
		if err := m.stream.Send(&trtllmpb.GenerateResponse{RequestId: m.id, Response: &trtllmpb.GenerateResponse_Chunk{Chunk: chunk}}); err != nil {
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
	done := &trtllmpb.GenerateComplete{OutputTokenIds: m.all, FinishReason: reason, PromptTokens: prompt, CompletionTokens: out, CachedTokens: m.cached}
	if m.config.GetLogprobs() > 0 {
		done.Logprobs = tokenLogprobs(m.all, m.config.GetLogprobs())
	}
	if m.config.GetPromptLogprobs() > 0 {
		done.PromptLogprobs = promptLogprobs(m.prompt, m.config.GetPromptLogprobs())
	}
	return m.stream.Send(&trtllmpb.GenerateResponse{RequestId: m.id, Response: &trtllmpb.GenerateResponse_Complete{Complete: done}})
}

// refuse is TensorRT-LLM's refusal of req, nil if it takes it, with
// INVALID_ARGUMENT: a prompt over max_input_len, no max_tokens, and an
// embedding_bias whose length is not vocab_size (the SMG adapter's words).
// A guide with empty text is ignored, as the SMG adapter ignores it; the
// mock constrains no output.
func (s *server) refuse(req *trtllmpb.GenerateRequest) error {
	sc := req.GetSamplingConfig()
	n := len(req.GetTokenized().GetInputTokenIds())
	switch bias := len(req.GetEmbeddingBias()); {
	case uint32(n) > s.e.maxInputLen:
		return status.Errorf(codes.InvalidArgument, "Prompt length (%d) exceeds maximum input length (%d).", n, s.e.maxInputLen)
	case req.GetMaxTokens() == 0:
		return status.Error(codes.InvalidArgument, "max_tokens: required, at least 1")
	case sc.GetNumReturnSequences() > 1 || sc.GetBeamWidth() > 1:
		return status.Error(codes.InvalidArgument, "sampling_config: the mock engine generates one sequence")
	case bias > 0 && s.e.vocabSize > 0 && uint32(bias) != s.e.vocabSize:
		return status.Errorf(codes.InvalidArgument, "embedding_bias length (%d) must match vocab_size (%d)", bias, s.e.vocabSize)
	}
	return nil
}
