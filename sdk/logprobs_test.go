package sdk

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestLogprobsOverPlugin: the request's Logprobs reach the adapter, and the
// logprobs the engine gives (per output token, with alternatives, ranks and
// unknown values; the prompt's, first or last) reach the host exactly, in
// order, merged or not, on both plugin paths.
func TestLogprobsOverPlugin(t *testing.T) {
	t.Parallel()
	prompt := []TokenLogprob{
		{Chosen: Logprob{TokenID: 1, Unknown: true}},
		{Chosen: Logprob{TokenID: 2, Logprob: -1.5, Rank: 3}, Top: []Logprob{{TokenID: 9, Logprob: -0.25, Rank: 1}}},
	}
	out := make([]Chunk, 300)
	for i := range out {
		lp := TokenLogprob{Chosen: Logprob{TokenID: uint32(i), Logprob: -float32(i) / 8, Rank: uint32(i%3 + 1)}}
		if i%2 == 0 {
			lp.Top = []Logprob{{TokenID: 7, Logprob: 0}, {TokenID: uint32(i), Logprob: -float32(i) / 8}}
		}
		if i%5 == 0 {
			lp.Chosen.Unknown, lp.Chosen.Logprob = true, 0
		}
		out[i] = Chunk{TokenIDs: []uint32{uint32(i)}, Logprobs: []TokenLogprob{lp}}
	}
	ask := &Logprobs{Output: true, Top: 2, Prompt: true, PromptTop: 1}
	for _, p := range pluginPaths {
		for _, last := range []bool{false, true} {
			name := p.name + map[bool]string{false: "/prompt first", true: "/prompt last"}[last]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var asked *Logprobs
				e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(_ context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
					asked = req.Logprobs
					chunks := append([]Chunk{{PromptLogprobs: prompt}}, out...)
					if last {
						chunks = append(append([]Chunk{}, out...), Chunk{PromptLogprobs: prompt})
					}
					for _, c := range chunks {
						if err := send(c); err != nil {
							return Result{}, err
						}
					}
					return Result{FinishReason: FinishStop}, nil
				}})
				var got Chunk
				var prompts int
				_, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1, 2}, Logprobs: ask}, func(c Chunk) error {
					got.TokenIDs = append(got.TokenIDs, c.TokenIDs...)
					got.Logprobs = append(got.Logprobs, c.Logprobs...)
					if c.PromptLogprobs != nil {
						prompts++
						got.PromptLogprobs = c.PromptLogprobs
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(ask, asked); diff != "" {
					t.Errorf("the adapter's request Logprobs (-sent +got):\n%s", diff)
				}
				want := joined(out)
				want.Logprobs = nil
				for _, c := range out {
					want.Logprobs = append(want.Logprobs, c.Logprobs...)
				}
				want.PromptLogprobs = prompt
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" || prompts != 1 {
					t.Errorf("host received %d prompts and (-engine +host):\n%s", prompts, diff)
				}
			})
		}
	}
}
