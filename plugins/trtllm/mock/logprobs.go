package mock

import (
	"slices"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// tokenLogprobs is TensorRT-LLM's TokenLogprob for each of ids with its
// top-k map (enginemock.PositionLogprobs), which has no order: the mock
// sends it least likely first. As TensorRT-LLM does, a token missing from
// its map is reported with logprob 0.0.
func tokenLogprobs(ids []uint32, k int32) []*trtllmpb.TokenLogprob {
	out := make([]*trtllmpb.TokenLogprob, len(ids))
	for i, id := range ids {
		d := enginemock.PositionLogprobs(id, int(k))
		t := &trtllmpb.TokenLogprob{TokenId: id}
		for _, e := range d.Top {
			t.TopLogprobs = append(t.TopLogprobs, &trtllmpb.TopLogprob{TokenId: e.TokenID, Logprob: e.Logprob})
			if e.TokenID == id {
				t.Logprob = e.Logprob
			}
		}
		slices.Reverse(t.TopLogprobs)
		out[i] = t
	}
	return out
}

// promptLogprobs scores every prompt token but the first, which has no
// context, with k alternatives each.
func promptLogprobs(prompt []uint32, k int32) []*trtllmpb.TokenLogprob {
	if len(prompt) < 2 {
		return nil
	}
	return tokenLogprobs(prompt[1:], k)
}
