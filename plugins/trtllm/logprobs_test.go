package trtllm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// wantLogprobs is what the adapter gives for ids with top k: enginemock's
// top-k (k, or 1 for the chosen token alone), likeliest first, no ranks;
// a chosen token outside it, which TensorRT-LLM reports as 0.0, Unknown.
func wantLogprobs(ids []uint32, k int) []sdk.TokenLogprob {
	var out []sdk.TokenLogprob
	for _, id := range ids {
		d := enginemock.PositionLogprobs(id, max(k, 1))
		t := sdk.TokenLogprob{Chosen: sdk.Logprob{TokenID: id, Unknown: true}}
		for _, e := range d.Top {
			if k > 0 {
				t.Top = append(t.Top, sdk.Logprob{TokenID: e.TokenID, Logprob: e.Logprob})
			}
			if e.TokenID == id {
				t.Chosen = sdk.Logprob{TokenID: id, Logprob: e.Logprob}
			}
		}
		out = append(out, t)
	}
	return out
}

// generateLogprobs runs req on a started adapter, checking each chunk has
// one logprob entry per token id when asked, and returns the output's and
// the prompt's logprobs and how many chunks carried the prompt's.
func generateLogprobs(t *testing.T, addr string, req sdk.GenerateRequest) (ids []uint32, out, prompt []sdk.TokenLogprob, prompts int) {
	t.Helper()
	a := started(t, addr)
	_, err := a.Generate(t.Context(), req, func(c sdk.Chunk) error {
		if req.Logprobs.Output && len(c.Logprobs) != len(c.TokenIDs) {
			t.Errorf("chunk of %d tokens has %d logprobs", len(c.TokenIDs), len(c.Logprobs))
		}
		ids, out = append(ids, c.TokenIDs...), append(out, c.Logprobs...)
		if c.PromptLogprobs != nil {
			prompt, prompts = c.PromptLogprobs, prompts+1
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Generate() = %v", err)
	}
	return ids, out, prompt, prompts
}

// TestGenerateLogprobs: each chunk's logprobs, not complete's list of all
// again; the top-k map sorted, likeliest first; a sampled token missing
// from it (0.0 on the wire) Unknown; the prompt's from complete, once, its
// first position Unknown. OutputConfig asks the top-k of each.
func TestGenerateLogprobs(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{TokensPerMessage: 2})
	prompt := []uint32{5, 6, 7, 8}
	lp := &sdk.Logprobs{Output: true, Top: 2, Prompt: true, PromptTop: 3}
	ids, out, got, prompts := generateLogprobs(t, addr, sdk.GenerateRequest{RequestID: "lp", TokenIDs: prompt, MaxTokens: 6, Logprobs: lp})
	want := wantLogprobs(ids, 2)
	if diff := cmp.Diff(want, out); diff != "" || len(ids) != 6 {
		t.Errorf("output logprobs of %d tokens (-want +got):\n%s", len(ids), diff)
	}
	unknown := 0
	for _, l := range out {
		if l.Chosen.Unknown {
			unknown++
		}
	}
	if unknown == 0 || unknown == len(out) {
		t.Errorf("%d of %d chosen tokens Unknown; the test wants some outside the top-k and some in", unknown, len(out))
	}
	wantPrompt := append([]sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: 5, Unknown: true}}}, wantLogprobs(prompt[1:], 3)...)
	if diff := cmp.Diff(wantPrompt, got); diff != "" || prompts != 1 {
		t.Errorf("prompt logprobs in %d chunks (-want +got):\n%s", prompts, diff)
	}
	oc := lastRequest(t, e).GetOutputConfig()
	if oc.Logprobs == nil || oc.GetLogprobs() != 2 || oc.PromptLogprobs == nil || oc.GetPromptLogprobs() != 3 {
		t.Errorf("OutputConfig sent %v, want logprobs 2, prompt_logprobs 3", oc)
	}
}

// TestGenerateLogprobsChosenOnly: Top 0 asks TensorRT-LLM's top 1 (its
// 0 asks none) and passes on the chosen token alone; without Logprobs
// no OutputConfig is sent.
func TestGenerateLogprobsChosenOnly(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{})
	req := sdk.GenerateRequest{RequestID: "c", TokenIDs: []uint32{1, 2}, MaxTokens: 4, Logprobs: &sdk.Logprobs{Output: true}}
	ids, out, prompt, _ := generateLogprobs(t, addr, req)
	if diff := cmp.Diff(wantLogprobs(ids, 0), out); diff != "" || prompt != nil {
		t.Errorf("logprobs (-want +got):\n%s\nprompt %v, want none", diff, prompt)
	}
	if oc := lastRequest(t, e).GetOutputConfig(); oc.GetLogprobs() != 1 || oc.PromptLogprobs != nil {
		t.Errorf("OutputConfig sent %v, want logprobs 1 alone", oc)
	}
	req.Logprobs = &sdk.Logprobs{}
	if _, out, prompt, _ := generateLogprobs(t, addr, req); out != nil || prompt != nil || lastRequest(t, e).OutputConfig != nil {
		t.Errorf("no logprobs asked: got %v, %v, OutputConfig %v", out, prompt, lastRequest(t, e).OutputConfig)
	}
}

// TestGenerateLogprobsRefused: more alternatives than the adapter lists
// is an invalid argument naming the field, before the engine is asked.
func TestGenerateLogprobsRefused(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{})
	a := started(t, addr)
	req := sdk.GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}, MaxTokens: 1, Logprobs: &sdk.Logprobs{Prompt: true, PromptTop: 21}}
	_, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "prompt_logprobs: 21") {
		t.Errorf("Generate = %v, want ErrInvalidArgument naming prompt_logprobs", err)
	}
}
