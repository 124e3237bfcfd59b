package mock

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// defaultMaxNewTokens is vLLM's default when StoppingCriteria.max_new_tokens is 0.
const defaultMaxNewTokens = 20

// OutputToken is output token i (from 0) for a prompt and sampling seed
// (0 when unset): (seed + sum(prompt)*31 + i*7919) % 32000 + 100, in uint32
// arithmetic, as [enginemock.OutputToken]. A text prompt is one token per
// UTF-8 byte, the byte's value.
func OutputToken(seed int64, prompt []uint32, i int) uint32 {
	return enginemock.OutputToken(seed, prompt, i)
}

// TokenText is the text the mock engine produces for a token, as
// [enginemock.TokenText].
func TokenText(id uint32) string { return enginemock.TokenText(id) }

func promptTokens(req *vllmpb.GenerateRequest) []uint32 {
	if _, ok := req.GetPrompt().(*vllmpb.GenerateRequest_Text); ok {
		text := req.GetText()
		ids := make([]uint32, len(text))
		for i := range len(text) {
			ids[i] = uint32(text[i])
		}
		return ids
	}
	return req.GetTokenIds().GetIds()
}

type inferenceServer struct {
	vllmpb.UnimplementedInferenceServer
	e *Engine
}

// GenerateStream sends prompt_info with the first message and finish_info
// with the last; an aborted request ends with a finish_reason ABORTED message.
func (s *inferenceServer) GenerateStream(req *vllmpb.GenerateRequest, out grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	return s.run(out.Context(), req, out.Send)
}

// Generate collects what GenerateStream would send into one response.
func (s *inferenceServer) Generate(ctx context.Context, req *vllmpb.GenerateRequest) (*vllmpb.GenerateResponse, error) {
	resp := &vllmpb.GenerateResponse{Outputs: &vllmpb.SequenceOutput{}}
	err := s.run(ctx, req, func(m *vllmpb.GenerateResponse) error {
		if m.PromptInfo != nil {
			resp.PromptInfo = m.PromptInfo
		}
		o := resp.Outputs
		o.Text += m.Outputs.GetText()
		o.NumTokens += m.Outputs.GetNumTokens()
		o.TokenIds = append(o.TokenIds, m.Outputs.GetTokenIds()...)
		o.Logprobs = append(o.Logprobs, m.Outputs.GetLogprobs()...)
		o.Ranks = append(o.Ranks, m.Outputs.GetRanks()...)
		o.CandidateTokens = append(o.CandidateTokens, m.Outputs.GetCandidateTokens()...)
		o.FinishInfo = m.Outputs.GetFinishInfo()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// run turns req into a generation and its chunks into vLLM's messages.
// As vLLM, it refuses a model it does not serve (NOT_FOUND) and a prompt
// longer than max_model_len (INVALID_ARGUMENT, in vLLM's words), and ends
// a generation with LENGTH where the sequence reaches max_model_len.
func (s *inferenceServer) run(ctx context.Context, req *vllmpb.GenerateRequest, send func(*vllmpb.GenerateResponse) error) error {
	s.e.RecordRequest(req)
	prompt := promptTokens(req)
	stopping := req.GetStopping()
	maxLen := s.e.cfg.MaxModelLen
	gen := enginemock.Request{
		ID:           req.GetRequestId(),
		Prompt:       prompt,
		Seed:         req.GetSampling().GetSeed(),
		MaxNewTokens: cmp.Or(stopping.GetMaxNewTokens(), defaultMaxNewTokens),
		MinNewTokens: stopping.GetMinNewTokens(),
		MinP:         req.GetSampling().GetMinP(),
		StopTokenIDs: stopping.GetStopTokenIds(),
	}
	if n := uint32(len(prompt)); n < maxLen {
		gen.MaxNewTokens = min(gen.MaxNewTokens, maxLen-n)
	}
	lp := askedLogprobs(req.GetResponse())
	gen.Err = s.refuse(req, prompt)
	if gen.Err == nil {
		gen.Err = refuseLogprobs(req.GetResponse(), lp, s.e.cfg.MaxLogprobs)
	}
	m := &messages{
		send:     send,
		prompt:   prompt,
		logprobs: lp,
		cached:   min(s.e.cfg.CachedTokens, uint32(len(prompt))),
		wantText: true,
		wantIDs:  req.GetResponse().GetOutputTokenIds(),
		stopText: stopping.GetIncludeStopStrings(),
	}
	if o := req.GetResponse(); o != nil && o.OutputText != nil {
		m.wantText = *o.OutputText // absent means true
	}
	return s.e.Generate(ctx, gen, m.chunk)
}

// refuse is vLLM's refusal of req (its logprob limits apart, in
// refuseLogprobs), nil if it takes it: a model it does
// not serve (NOT_FOUND) and, with INVALID_ARGUMENT in vLLM's words, a
// prompt longer than max_model_len, num_sequences > 1, a json schema that
// is not JSON and a blank grammar. The mock does not constrain its output.
func (s *inferenceServer) refuse(req *vllmpb.GenerateRequest, prompt []uint32) error {
	maxLen := s.e.cfg.MaxModelLen
	d := req.GetDecoding()
	switch model := req.GetModel(); {
	case model != "" && model != s.e.Config().Model:
		return status.Errorf(codes.NotFound, "The model `%s` does not exist.", model)
	case uint32(len(prompt)) > maxLen:
		return status.Errorf(codes.InvalidArgument, "The decoder prompt (length %d) is longer than the maximum model length of %d. "+
			"Make sure that `max_model_len` is no smaller than the number of text tokens.", len(prompt), maxLen)
	case req.GetSampling().GetNumSequences() > 1:
		return status.Error(codes.InvalidArgument, "num_sequences > 1 is not supported")
	}
	switch so := d.GetStructuredOutput().(type) {
	case *vllmpb.DecodingParameters_Json:
		var v any
		if err := json.Unmarshal([]byte(so.Json), &v); err != nil {
			return status.Errorf(codes.InvalidArgument, "invalid json schema: %v", err)
		}
	case *vllmpb.DecodingParameters_Grammar:
		if strings.TrimSpace(so.Grammar) == "" {
			return status.Error(codes.InvalidArgument, "grammar must not be blank")
		}
	}
	return nil
}

// messages formats one generation's chunks as vLLM does.
type messages struct {
	send     func(*vllmpb.GenerateResponse) error
	prompt   []uint32
	logprobs logprobs
	wantText bool
	wantIDs  bool
	stopText bool   // include_stop_strings
	cached   uint32 // num_cached_tokens to report; 0: none (an older vLLM)
	sent     bool
}

// chunk sends one chunk as a message, with prompt_info if it is the first. vLLM keeps a
// stop token's id but drops its text unless asked to include it.
func (m *messages) chunk(c enginemock.Chunk) error {
	out := &vllmpb.SequenceOutput{NumTokens: uint32(len(c.Tokens))}
	if m.wantText {
		toks := c.Tokens
		if c.Finish != nil && c.Finish.Reason == enginemock.FinishStop && !m.stopText {
			toks = toks[:len(toks)-1] // the stop token is the last
		}
		var b strings.Builder
		for _, id := range toks {
			b.WriteString(TokenText(id))
		}
		out.Text = b.String()
	}
	if m.wantIDs {
		out.TokenIds = c.Tokens
	}
	if m.logprobs.output >= 0 {
		out.Logprobs, out.Ranks, out.CandidateTokens = positions(c.Tokens, m.logprobs.output)
	}
	if f := c.Finish; f != nil {
		out.FinishInfo = &vllmpb.FinishInfo{NumOutputTokens: f.OutputTokens, FinishReason: finishReasons[f.Reason]}
		if m.cached > 0 {
			out.FinishInfo.NumCachedTokens = &m.cached
		}
		if f.Reason == enginemock.FinishStop {
			out.FinishInfo.StopReason = &vllmpb.FinishInfo_StopTokenId{StopTokenId: f.StopToken}
		}
	}
	msg := &vllmpb.GenerateResponse{Outputs: out}
	if !m.sent {
		msg.PromptInfo = m.logprobs.promptInfo(m.prompt)
		m.sent = true
	}
	return m.send(msg)
}

var finishReasons = map[enginemock.FinishReason]vllmpb.FinishInfo_FinishReason{
	enginemock.FinishLength:  vllmpb.FinishInfo_LENGTH,
	enginemock.FinishStop:    vllmpb.FinishInfo_STOP,
	enginemock.FinishAborted: vllmpb.FinishInfo_ABORTED,
}
