package trtllm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk"
)

// MaxLogprobs is the most alternatives per position the adapter lists
// (Accepts logprobs=20,prompt_logprobs=20): TensorRT-LLM's gRPC API
// states no cap, and 20 is OpenAI's top_logprobs limit.
const MaxLogprobs = 20

// outputConfig asks for l: OutputConfig.logprobs and prompt_logprobs are
// top-k counts, of which 0 asks for none, so a request for the chosen
// token alone (Top 0) asks for the top 1 and the adapter passes on the
// chosen token only (Unknown where it is not the likeliest).
func outputConfig(l *sdk.Logprobs) (*trtllmpb.OutputConfig, error) {
	if l == nil || !l.Output && !l.Prompt {
		return nil, nil
	}
	o := &trtllmpb.OutputConfig{}
	for _, f := range []struct {
		on    bool
		top   uint32
		to    **int32
		field string
	}{{l.Output, l.Top, &o.Logprobs, "top_logprobs"}, {l.Prompt, l.PromptTop, &o.PromptLogprobs, "prompt_logprobs"}} {
		if !f.on {
			continue
		}
		if f.top > MaxLogprobs {
			return nil, fmt.Errorf("%w: %s: %d; TensorRT-LLM's adapter takes at most %d", sdk.ErrInvalidArgument, f.field, f.top, MaxLogprobs)
		}
		k := int32(max(f.top, 1))
		*f.to = &k
	}
	return o, nil
}

// tokenLogprobs maps TensorRT-LLM's TokenLogprobs, each top-k cut to top
// entries, most likely first. The chosen token's logprob is 0.0 when the
// map lacks it: Unknown. TensorRT-LLM gives no ranks.
func tokenLogprobs(ls []*trtllmpb.TokenLogprob, top uint32) []sdk.TokenLogprob {
	if len(ls) == 0 {
		return nil
	}
	out := make([]sdk.TokenLogprob, len(ls))
	for i, l := range ls {
		t := &out[i]
		t.Chosen = sdk.Logprob{TokenID: l.GetTokenId(), Logprob: l.GetLogprob(), Unknown: true}
		for _, e := range l.GetTopLogprobs() {
			if e.GetTokenId() == l.GetTokenId() {
				t.Chosen.Unknown = false
			}
			if top > 0 {
				t.Top = append(t.Top, sdk.Logprob{TokenID: e.GetTokenId(), Logprob: e.GetLogprob()})
			}
		}
		if t.Chosen.Unknown {
			t.Chosen.Logprob = 0
		}
		// A map has no order: the likeliest first, ties by id.
		slices.SortStableFunc(t.Top, func(a, b sdk.Logprob) int {
			return cmp.Or(cmp.Compare(b.Logprob, a.Logprob), cmp.Compare(a.TokenID, b.TokenID))
		})
		t.Top = t.Top[:min(len(t.Top), int(top))]
	}
	return out
}

// promptLogprobs is complete's prompt_logprobs, one per prompt position:
// TensorRT-LLM scores a prompt token from the ones before, so the first
// position, which has none, is put back Unknown when it is left out.
// Never nil when asked, so the prompt arrives.
func promptLogprobs(ls []*trtllmpb.TokenLogprob, prompt []uint32, top uint32) []sdk.TokenLogprob {
	out := tokenLogprobs(ls, top)
	if len(out) > 0 && len(out) == len(prompt)-1 {
		out = append([]sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: prompt[0], Unknown: true}}}, out...)
	}
	if out == nil {
		out = []sdk.TokenLogprob{}
	}
	return out
}
