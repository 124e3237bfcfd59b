package mock

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// defaultMaxNewTokens is SGLang's max_new_tokens when the request leaves it
// unset.
const defaultMaxNewTokens = 128

// server serves sglang.runtime.v1.SglangService.
type server struct {
	sglangpb.UnimplementedSglangServiceServer
	e *Engine
}

// HealthCheck answers healthy once ready while "" serves, after the
// engine's check latency (POST /check-latency).
func (s *server) HealthCheck(ctx context.Context, _ *sglangpb.HealthCheckRequest) (*sglangpb.HealthCheckResponse, error) {
	if err := s.e.CheckDelay(ctx); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	c := s.e.Condition()
	healthy := c.Ready && !c.Stopped && s.e.Status("") == healthpb.HealthCheckResponse_SERVING
	return &sglangpb.HealthCheckResponse{Healthy: healthy}, nil
}

// WatchEngineState sends the current snapshot, then every change.
func (s *server) WatchEngineState(_ *sglangpb.WatchEngineStateRequest, stream grpc.ServerStreamingServer[sglangpb.EngineStateSnapshot]) error {
	return s.e.state.watch(stream, s.e.cfg.Layout)
}

func (s *server) GetModelInfo(context.Context, *sglangpb.GetModelInfoRequest) (*sglangpb.GetModelInfoResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return s.e.modelInfo(), nil
}

func (s *server) GetServerInfo(context.Context, *sglangpb.GetServerInfoRequest) (*sglangpb.GetServerInfoResponse, error) {
	if err := s.e.Available(); err != nil {
		return nil, err
	}
	return s.e.serverInfo(), nil
}

// Abort ends rid, or every request in flight with abort_all.
func (s *server) Abort(_ context.Context, req *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	if req.GetAbortAll() {
		s.e.AbortInFlight()
	} else {
		s.e.Abort(req.GetRid())
	}
	return &sglangpb.AbortResponse{Success: true}, nil
}

// PauseGeneration pauses; mode "abort" also aborts requests in flight.
func (s *server) PauseGeneration(_ context.Context, req *sglangpb.PauseGenerationRequest) (*sglangpb.PauseGenerationResponse, error) {
	s.e.SetPaused(true)
	if req.GetMode() == "abort" {
		s.e.AbortInFlight()
	}
	return &sglangpb.PauseGenerationResponse{Message: "paused"}, nil
}

func (s *server) ContinueGeneration(context.Context, *sglangpb.ContinueGenerationRequest) (*sglangpb.ContinueGenerationResponse, error) {
	s.e.SetPaused(false)
	return &sglangpb.ContinueGenerationResponse{Message: "continued"}, nil
}

// Generate streams the new output ids of one request; the message with
// finished true carries meta_info. It records every request as it came,
// fields of the other layout included (a real server skips those).
func (s *server) Generate(req *sglangpb.GenerateRequest, stream grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	s.e.RecordRequest(req)
	if s.e.cfg.EmbeddingDim > 0 {
		return errNotGeneration
	}
	p := req.GetSamplingParams()
	gen := enginemock.Request{
		ID:           req.GetRid(),
		MaxNewTokens: uint32(cmp.Or(p.GetMaxNewTokens(), defaultMaxNewTokens)),
		MinNewTokens: uint32(max(p.GetMinNewTokens(), 0)),
		MinP:         p.GetMinP(),
	}
	var err error
	if gen.Prompt, err = uint32s("input_ids", req.GetInputIds()); err == nil {
		gen.StopTokenIDs, err = uint32s("sampling_params.stop_token_ids", p.GetStopTokenIds())
	}
	switch {
	case err != nil:
		gen.Err = err
	case len(p.GetStop()) > 0:
		gen.Err = stopRefused(p.GetStop())
	case p.GetN() > 1:
		gen.Err = status.Errorf(codes.InvalidArgument, "sampling_params.n: the mock engine generates one sequence, got %d", p.GetN())
	case p.GetMaxNewTokens() < 0:
		gen.Err = status.Errorf(codes.InvalidArgument, "sampling_params.max_new_tokens: %d is negative", p.GetMaxNewTokens())
	default:
		gen.Err = s.e.checkLength(len(gen.Prompt), p.MaxNewTokens)
	}
	cached := 0
	if gen.Err == nil {
		cached = s.e.cache.hit(gen.Prompt)
	}
	lp := askedLogprobs(req, gen.Prompt, s.e.cfg.OmitFirstPromptLogprob)
	return s.e.Generate(stream.Context(), gen, func(c enginemock.Chunk) error {
		return stream.Send(response(c, len(gen.Prompt), cached, lp))
	})
}

// response is one chunk's message: its ids, its logprobs when asked, and
// on the last the usage, the finish reason and the prompt's logprobs.
func response(c enginemock.Chunk, prompt, cached int, lp logprobs) *sglangpb.GenerateResponse {
	ids := make([]int32, len(c.Tokens))
	for i, t := range c.Tokens {
		ids[i] = int32(t)
	}
	msg := &sglangpb.GenerateResponse{OutputIds: ids, MetaInfo: map[string]string{}}
	lp.output(msg.MetaInfo, c.Tokens)
	if f := c.Finish; f != nil {
		msg.Finished = true
		msg.MetaInfo["prompt_tokens"] = strconv.Itoa(prompt)
		msg.MetaInfo["completion_tokens"] = strconv.FormatUint(uint64(f.OutputTokens), 10)
		msg.MetaInfo["cached_tokens"] = strconv.Itoa(cached)
		msg.MetaInfo["finish_reason"] = finishReason(f)
		lp.input(msg.MetaInfo)
	}
	if len(msg.MetaInfo) == 0 {
		msg.MetaInfo = nil
	}
	return msg
}

// prefixCache stands for SGLang's radix cache with room for one prompt:
// a request's cached_tokens are the tokens it shares from the start with
// the last prompt, less its last token, which is always computed.
type prefixCache struct {
	mu   sync.Mutex
	last []uint32
}

func (c *prefixCache) hit(prompt []uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(prompt)-1 && n < len(c.last) && prompt[n] == c.last[n] {
		n++
	}
	c.last = append([]uint32(nil), prompt...)
	return n
}

// checkLength refuses a request that does not fit the context, as
// SGLang's tokenizer manager does before scheduling it: an input of the
// context length or more, or (when max_new_tokens is set) an input and
// max_new_tokens that reach it. SGLang raises ValueError in these words;
// its gRPC server answers INVALID_ARGUMENT.
func (e *Engine) checkLength(input int, maxNew *int32) error {
	ctxLen := int(e.contextLength())
	if input >= ctxLen {
		return status.Errorf(codes.InvalidArgument, "The input (%d tokens) is longer than or equal to the model's context length (%d tokens).", input, ctxLen)
	}
	if maxNew != nil && input+int(*maxNew) >= ctxLen {
		return status.Errorf(codes.InvalidArgument, "Requested token count exceeds the model's maximum context length of %d tokens. "+
			"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
			"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			ctxLen, input+int(*maxNew), input, *maxNew)
	}
	return nil
}

// stopRefused is SGLang's answer to stop strings on a server without a
// tokenizer (skip_tokenizer_init, as its gRPC workers run): the ValueError
// of sampling_params.py's raise_if_tokenizer_required, the list in Python's
// repr, as INVALID_ARGUMENT.
func stopRefused(stop []string) error {
	quoted := make([]string, len(stop))
	for i, s := range stop {
		quoted[i] = pyRepr(s)
	}
	return status.Errorf(codes.InvalidArgument, "stop=[%s] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).", strings.Join(quoted, ", "))
}

// pyRepr is Python's repr of a string, for the common characters: single
// quotes unless the string holds one and no double quote.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, q, `\`+q, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return q + r.Replace(s) + q
}

// finishReason is meta_info's finish_reason: a JSON object whose type says
// why the generation ended.
func finishReason(f *enginemock.Finish) string {
	switch f.Reason {
	case enginemock.FinishStop:
		return fmt.Sprintf(`{"type":"stop","matched":%d}`, f.StopToken)
	case enginemock.FinishLength:
		return fmt.Sprintf(`{"type":"length","length":%d}`, f.OutputTokens)
	}
	return `{"type":"abort","message":"aborted"}`
}

// uint32s reads token ids, refusing negative ones by field name.
func uint32s(field string, ids []int32) ([]uint32, error) {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "%s[%d]: %d is negative", field, i, id)
		}
		out[i] = uint32(id)
	}
	return out, nil
}
