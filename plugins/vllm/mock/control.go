package mock

import (
	"context"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
)

// controlServer serves vllm.Control. Every RPC answers UNAVAILABLE until the
// startup delay has passed and after Stop.
type controlServer struct {
	vllmpb.UnimplementedControlServer
	e *Engine
}

func (s *controlServer) GetServerInfo(context.Context, *vllmpb.GetServerInfoRequest) (*vllmpb.ServerInfo, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	c := s.e.cfg
	return &vllmpb.ServerInfo{
		EngineVersion: c.EngineVersion,
		ApiVersion:    "v1",
		InstanceId:    s.e.InstanceID(),
		Parallelism: &vllmpb.ParallelismInfo{
			TensorParallelSize:   1,
			PipelineParallelSize: 1,
			DataParallelSize:     1,
			DataParallelRank:     0,
		},
		MaxModelLen:        c.MaxModelLen,
		KvBlockSize:        c.KVBlockSize,
		TotalKvBlocks:      1024,
		MaxRunningRequests: 256,
		MaxBatchedTokens:   8192,
		RlCapabilities:     &vllmpb.RlCapabilities{SleepModeEnabled: true},
	}, nil
}

func (s *controlServer) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.ModelInfo, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	model := s.e.Config().Model
	return &vllmpb.ModelInfo{
		ModelId:               model,
		ServedModelName:       model,
		SupportsTextInput:     true,
		SupportsTokenIdsInput: true,
		ReasoningParser:       s.e.cfg.ReasoningParser,
		ToolCallParser:        s.e.cfg.ToolCallParser,
	}, nil
}

// Abort counts every id, known or not, and aborts its in-flight streams.
func (s *controlServer) Abort(_ context.Context, req *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	s.e.Abort(req.GetRequestIds()...)
	return &vllmpb.AbortResponse{}, nil
}

// Sleep ignores the level: the mock has no weights or KV cache to free.
func (s *controlServer) Sleep(_ context.Context, req *vllmpb.SleepRequest) (*vllmpb.SleepResponse, error) {
	if err := s.pause(s.e.SetSleeping, req.GetMode()); err != nil {
		return nil, err
	}
	return &vllmpb.SleepResponse{}, nil
}

// WakeUp wakes the engine fully whatever the tags.
func (s *controlServer) WakeUp(context.Context, *vllmpb.WakeUpRequest) (*vllmpb.WakeUpResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	s.e.SetSleeping(false)
	return &vllmpb.WakeUpResponse{}, nil
}

func (s *controlServer) IsSleeping(context.Context, *vllmpb.IsSleepingRequest) (*vllmpb.IsSleepingResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return &vllmpb.IsSleepingResponse{Sleeping: s.e.Condition().Sleeping}, nil
}

func (s *controlServer) PauseGeneration(_ context.Context, req *vllmpb.PauseGenerationRequest) (*vllmpb.PauseGenerationResponse, error) {
	if err := s.pause(s.e.SetPaused, req.GetMode()); err != nil {
		return nil, err
	}
	return &vllmpb.PauseGenerationResponse{}, nil
}

func (s *controlServer) ResumeGeneration(context.Context, *vllmpb.ResumeGenerationRequest) (*vllmpb.ResumeGenerationResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	s.e.SetPaused(false)
	return &vllmpb.ResumeGenerationResponse{}, nil
}

func (s *controlServer) IsPaused(context.Context, *vllmpb.IsPausedRequest) (*vllmpb.IsPausedResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return &vllmpb.IsPausedResponse{Paused: s.e.Condition().Paused}, nil
}

// pause sleeps or pauses through set; PAUSE_MODE_ABORT also aborts requests
// in flight, as in vLLM, while other modes let them run on.
func (s *controlServer) pause(set func(bool), mode vllmpb.PauseMode) error {
	if err := s.e.Available(); err != nil {
		return err
	}
	set(true)
	if mode == vllmpb.PauseMode_PAUSE_MODE_ABORT {
		s.e.AbortInFlight()
	}
	return nil
}
