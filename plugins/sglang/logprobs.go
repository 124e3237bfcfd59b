package sglang

import (
	"encoding/json"
	"fmt"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
)

// MaxLogprobs is the most alternatives per position the adapter lists
// (Accepts logprobs=20,prompt_logprobs=20): SGLang states no cap, and 20
// is OpenAI's top_logprobs limit.
const MaxLogprobs = 20

// setLogprobs asks for l: return_logprob, one top_logprobs_num for output
// and prompt (the larger; each is cut to its own in the answer), and
// logprob_start_len 0 for every prompt position or -1 for none.
func setLogprobs(w *sglangpb.GenerateRequest, l *sdk.Logprobs) error {
	if l == nil || !l.Output && !l.Prompt {
		return nil
	}
	top := uint32(0)
	if l.Output {
		top = l.Top
	}
	if l.Prompt {
		top = max(top, l.PromptTop)
	}
	n, err := int32s("top_logprobs", []uint32{top})
	if err != nil {
		return err
	}
	start := int32(-1)
	if l.Prompt {
		start = 0
	}
	on := true
	w.ReturnLogprob, w.LogprobStartLen = &on, &start
	if top > 0 {
		w.TopLogprobsNum = &n[0]
	}
	return nil
}

// triple is one of meta_info's [logprob, token_id, text] entries; the
// logprob is null where the engine has none (the prompt's first position).
type triple struct {
	logprob *float64
	id      uint32
}

func (t *triple) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) < 2 {
		return fmt.Errorf("logprob entry %s: want [logprob, token_id, text]", b)
	}
	if err := json.Unmarshal(v[0], &t.logprob); err != nil {
		return err
	}
	return json.Unmarshal(v[1], &t.id)
}

// metaLogprobs reads meta_info's token and top logprobs under prefix
// ("output" or "input"), each position's top cut to top entries; nil
// when meta has none or they do not parse.
func metaLogprobs(meta map[string]string, prefix string, top uint32) []sdk.TokenLogprob {
	var tokens []triple
	if json.Unmarshal([]byte(meta[prefix+"_token_logprobs"]), &tokens) != nil || tokens == nil {
		return nil
	}
	var tops [][]triple
	if s, ok := meta[prefix+"_top_logprobs"]; ok && json.Unmarshal([]byte(s), &tops) != nil {
		tops = nil
	}
	out := make([]sdk.TokenLogprob, len(tokens))
	for i, t := range tokens {
		out[i].Chosen = logprob(t)
		if i >= len(tops) {
			continue
		}
		for j, e := range tops[i][:min(len(tops[i]), int(top))] {
			// SGLang's top-k is sorted: the rank is the place in it.
			l := logprob(e)
			l.Rank = uint32(j + 1)
			out[i].Top = append(out[i].Top, l)
			if e.id == t.id {
				out[i].Chosen.Rank = l.Rank
			}
		}
	}
	return out
}

func logprob(t triple) sdk.Logprob {
	if t.logprob == nil {
		return sdk.Logprob{TokenID: t.id, Unknown: true}
	}
	return sdk.Logprob{TokenID: t.id, Logprob: float32(*t.logprob)}
}

// promptLogprobs is the final message's input logprobs, one per prompt
// position: an older SGLang leaves the first (unscored) position out, and
// it is put back Unknown. Never nil when asked, so the prompt arrives.
func promptLogprobs(meta map[string]string, prompt []uint32, top uint32) []sdk.TokenLogprob {
	in := metaLogprobs(meta, "input", top)
	if len(in) == len(prompt)-1 {
		in = append([]sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: prompt[0], Unknown: true}}}, in...)
	}
	if in == nil {
		in = []sdk.TokenLogprob{}
	}
	return in
}
