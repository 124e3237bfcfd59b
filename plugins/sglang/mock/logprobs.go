package mock

import (
	"encoding/json"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// logprobs is what a request asks of logprobs, answered in meta_info as
// SGLang does: each chunk's output_token_logprobs and output_top_logprobs,
// and the final message's input_token_logprobs and input_top_logprobs.
type logprobs struct {
	on     bool
	top    int
	prompt []uint32 // nil: no prompt logprobs (logprob_start_len -1)
	// omitFirst leaves the prompt's first position out, as older SGLang
	// releases do; current ones send it as [null, id, null].
	omitFirst bool
}

func askedLogprobs(req *sglangpb.GenerateRequest, prompt []uint32, omitFirst bool) logprobs {
	l := logprobs{on: req.GetReturnLogprob(), top: int(max(req.GetTopLogprobsNum(), 0)), omitFirst: omitFirst}
	if l.on && req.LogprobStartLen != nil && req.GetLogprobStartLen() >= 0 {
		l.prompt = prompt[min(int(req.GetLogprobStartLen()), len(prompt)):]
	}
	return l
}

// output adds the chunk's output logprobs to meta.
func (l logprobs) output(meta map[string]string, ids []uint32) {
	if !l.on {
		return
	}
	tokens, tops := positions(ids, l.top)
	meta["output_token_logprobs"], meta["output_top_logprobs"] = encode(tokens), encode(tops)
}

// input adds the prompt's logprobs to the final message's meta.
func (l logprobs) input(meta map[string]string) {
	if l.prompt == nil {
		return
	}
	tokens, tops := positions(l.prompt, l.top)
	if len(tokens) > 0 {
		tokens[0], tops[0] = []any{nil, l.prompt[0], nil}, nil // the first position has no score
		if l.omitFirst {
			tokens, tops = tokens[1:], tops[1:]
		}
	}
	meta["input_token_logprobs"], meta["input_top_logprobs"] = encode(tokens), encode(tops)
}

// positions is SGLang's [logprob, id, null] triples for ids, and each
// position's top-k (enginemock.PositionLogprobs, the chosen token among
// them when it ranks in), null for none.
func positions(ids []uint32, k int) (tokens [][]any, tops [][][]any) {
	for _, id := range ids {
		d := enginemock.PositionLogprobs(id, k)
		tokens = append(tokens, []any{d.Chosen.Logprob, id, nil})
		var top [][]any
		for _, e := range d.Top {
			top = append(top, []any{e.Logprob, e.TokenID, nil})
		}
		tops = append(tops, top)
	}
	return tokens, tops
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // numbers, ids and nulls only
	}
	return string(b)
}
