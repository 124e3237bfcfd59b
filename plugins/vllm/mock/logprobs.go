package mock

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// vocabSize is the mock model's vocabulary: what CandidateTokens.all
// asks for, as vLLM counts it against max_logprobs.
const vocabSize = 32100

// logprobs is what a request asks of logprobs: -1 for none, else how many
// alternatives per position.
type logprobs struct {
	output, prompt int
	promptIDs      bool
}

// askedLogprobs reads req's ResponseOptions.
func askedLogprobs(o *vllmpb.ResponseOptions) logprobs {
	l := logprobs{output: -1, prompt: -1, promptIDs: o.GetPromptTokenIds()}
	if o.GetOutputLogprobs() {
		l.output = topN(o.GetOutputCandidates())
	}
	if o.GetPromptLogprobs() {
		l.prompt = topN(o.GetPromptCandidates())
	}
	return l
}

// topN is how many alternatives c selects: all counts as the vocabulary;
// token ids, which the mock scores as none, as 0.
func topN(c *vllmpb.CandidateTokens) int {
	switch s := c.GetSelect().(type) {
	case *vllmpb.CandidateTokens_TopN:
		return int(s.TopN)
	case *vllmpb.CandidateTokens_All:
		if s.All {
			return vocabSize
		}
	}
	return 0
}

// refuseLogprobs is vLLM's refusal of asking more than max alternatives
// (its --max-logprobs), in its words, and of prompt_candidates by token ids.
func refuseLogprobs(o *vllmpb.ResponseOptions, l logprobs, max uint32) error {
	if _, ok := o.GetPromptCandidates().GetSelect().(*vllmpb.CandidateTokens_TokenIds); ok {
		return status.Error(codes.InvalidArgument, "prompt_candidates does not support token_ids")
	}
	if l.output > int(max) {
		return status.Errorf(codes.InvalidArgument, "Requested sample logprobs of %d, which is greater than max allowed: %d", l.output, max)
	}
	if l.prompt > int(max) {
		return status.Errorf(codes.InvalidArgument, "Requested prompt logprobs of %d, which is greater than max allowed: %d", l.prompt, max)
	}
	return nil
}

// positions fills vLLM's parallel lists for ids, k alternatives each
// (enginemock.PositionLogprobs, the sampled token left out, as vLLM's
// candidate_tokens hold only the others).
func positions(ids []uint32, k int) (lps []float32, ranks []uint32, cands []*vllmpb.CandidateTokenInfo) {
	for _, id := range ids {
		d := enginemock.PositionLogprobs(id, k)
		lps = append(lps, d.Chosen.Logprob)
		ranks = append(ranks, d.Chosen.Rank)
		info := &vllmpb.CandidateTokenInfo{}
		for _, t := range d.Top {
			if t.TokenID != id {
				info.Tokens = append(info.Tokens, &vllmpb.CandidateTokenInfo_TokenInfo{Id: t.TokenID, Logprob: t.Logprob, Rank: t.Rank})
			}
		}
		cands = append(cands, info)
	}
	return lps, ranks, cands
}

// promptInfo is the first message's PromptInfo: every prompt position
// scored but the first, sent as 0.0, rank 0 and no candidates.
func (l logprobs) promptInfo(prompt []uint32) *vllmpb.PromptInfo {
	pi := &vllmpb.PromptInfo{NumPromptTokens: uint32(len(prompt))}
	if l.promptIDs {
		pi.TokenIds = prompt
	}
	if l.prompt >= 0 && len(prompt) > 0 {
		lps, ranks, cands := positions(prompt[1:], l.prompt)
		pi.Logprobs = append([]float32{0}, lps...)
		pi.Ranks = append([]uint32{0}, ranks...)
		pi.CandidateTokens = append([]*vllmpb.CandidateTokenInfo{{}}, cands...)
	}
	return pi
}
