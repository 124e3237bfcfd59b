package sdk_test

import (
	"fmt"

	"github.com/vigilhq/vigil/sdk"
)

// An adapter whose engine returns logprobs lists "logprobs=N" (and
// "prompt_logprobs=N") in Worker.Accepts and fills Chunk.Logprobs, one
// entry per token id, from its engine's message; the prompt's come once,
// their first position Unknown.
func ExampleLogprobs() {
	worker := sdk.Worker{ModelID: "llama", Accepts: "logprobs=20,prompt_logprobs=20"}
	fmt.Println(worker.Accepts)

	// An engine message: token ids, each with its logprob and its
	// likeliest alternatives.
	type alt struct {
		id uint32
		lp float32
	}
	msg := struct {
		ids  []uint32
		lps  []float32
		alts [][]alt
	}{[]uint32{42, 7}, []float32{-0.1, -2.5}, [][]alt{{{42, -0.1}, {9, -2.4}}, {{3, -0.3}, {8, -1.9}}}}

	// The adapter's Generate, for req.Logprobs {Output: true, Top: 2}:
	chunk := sdk.Chunk{TokenIDs: msg.ids}
	for i, id := range msg.ids {
		l := sdk.TokenLogprob{Chosen: sdk.Logprob{TokenID: id, Logprob: msg.lps[i]}}
		for _, a := range msg.alts[i] {
			l.Top = append(l.Top, sdk.Logprob{TokenID: a.id, Logprob: a.lp})
		}
		chunk.Logprobs = append(chunk.Logprobs, l)
	}
	prompt := sdk.Chunk{PromptLogprobs: []sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: 1, Unknown: true}}}}
	fmt.Println(len(chunk.Logprobs) == len(chunk.TokenIDs), chunk.Logprobs[1].Top[0].TokenID, prompt.PromptLogprobs[0].Chosen.Unknown)
	// Output:
	// logprobs=20,prompt_logprobs=20
	// true 3 true
}
