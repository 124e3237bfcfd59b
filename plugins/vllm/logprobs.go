package vllm

import (
	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
)

// setLogprobs asks for what l asks: the sampled (or prompt) token's
// logprob and rank per position, and top_n alternatives when Top is above
// 0. vLLM's alternatives exclude the sampled token; the host merges it in.
func setLogprobs(o *vllmpb.ResponseOptions, l *sdk.Logprobs) {
	if l == nil {
		return
	}
	if l.Output {
		o.OutputLogprobs = true
		o.OutputCandidates = candidates(l.Top)
	}
	if l.Prompt {
		o.PromptLogprobs, o.PromptTokenIds = true, true
		o.PromptCandidates = candidates(l.PromptTop)
	}
}

// candidates selects the top n; nil (only the sampled token) for 0.
func candidates(n uint32) *vllmpb.CandidateTokens {
	if n == 0 {
		return nil
	}
	return &vllmpb.CandidateTokens{Select: &vllmpb.CandidateTokens_TopN{TopN: n}}
}

// promptLogprobs is PromptInfo's logprobs, nil unless it has them. The
// first position has no score (vLLM sends 0.0, rank 0): Unknown.
func promptLogprobs(pi *vllmpb.PromptInfo) []sdk.TokenLogprob {
	out := tokenLogprobs(pi.GetTokenIds(), pi.GetLogprobs(), pi.GetRanks(), pi.GetCandidateTokens())
	if len(out) > 0 {
		out[0].Chosen.Logprob, out[0].Chosen.Unknown, out[0].Top = 0, true, nil
	}
	return out
}

// tokenLogprobs turns vLLM's parallel lists (one entry per position) into
// the sdk's.
func tokenLogprobs(ids []uint32, logprobs []float32, ranks []uint32, cands []*vllmpb.CandidateTokenInfo) []sdk.TokenLogprob {
	if len(logprobs) == 0 {
		return nil
	}
	out := make([]sdk.TokenLogprob, len(logprobs))
	for i, lp := range logprobs {
		t := &out[i]
		if i < len(ids) {
			t.Chosen.TokenID = ids[i]
		}
		if i < len(ranks) {
			t.Chosen.Rank = ranks[i]
		}
		t.Chosen.Logprob = lp
		if i < len(cands) {
			for _, c := range cands[i].GetTokens() {
				t.Top = append(t.Top, sdk.Logprob{TokenID: c.GetId(), Logprob: c.GetLogprob(), Rank: c.GetRank()})
			}
		}
	}
	return out
}
