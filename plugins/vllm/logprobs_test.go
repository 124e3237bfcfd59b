package vllm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// wantLogprobs is what the adapter gives for ids with k alternatives
// each: enginemock's distribution, the chosen token left out of Top as
// vLLM leaves it out of candidate_tokens.
func wantLogprobs(ids []uint32, k int) []sdk.TokenLogprob {
	var out []sdk.TokenLogprob
	for _, id := range ids {
		d := enginemock.PositionLogprobs(id, k)
		t := sdk.TokenLogprob{Chosen: sdk.Logprob{TokenID: id, Logprob: d.Chosen.Logprob, Rank: d.Chosen.Rank}}
		for _, e := range d.Top {
			if e.TokenID != id {
				t.Top = append(t.Top, sdk.Logprob{TokenID: e.TokenID, Logprob: e.Logprob, Rank: e.Rank})
			}
		}
		out = append(out, t)
	}
	return out
}

// generateLogprobs runs req, checking each chunk has one logprob entry
// per token id, and returns the output's and the prompt's logprobs and
// how many chunks carried the prompt's.
func generateLogprobs(t *testing.T, addr string, req sdk.GenerateRequest) (ids []uint32, out, prompt []sdk.TokenLogprob, prompts int) {
	t.Helper()
	a := started(t, addr)
	_, err := a.Generate(t.Context(), req, func(c sdk.Chunk) error {
		if req.Logprobs != nil && req.Logprobs.Output && len(c.Logprobs) != len(c.TokenIDs) {
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

// TestGenerateLogprobs: streamed output logprobs (top-k alternatives
// from candidate_tokens, the sampled token's rank from ranks) and the
// prompt's, once, its first position Unknown; asked on vLLM's wire as
// output_logprobs + output_candidates top_n and prompt_logprobs +
// prompt_candidates, with the prompt's ids.
func TestGenerateLogprobs(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m", TokensPerMessage: 2})
	prompt := []uint32{5, 6, 7}
	lp := &sdk.Logprobs{Output: true, Top: 3, Prompt: true, PromptTop: 2}
	ids, out, got, prompts := generateLogprobs(t, addr, sdk.GenerateRequest{RequestID: "lp", TokenIDs: prompt, MaxTokens: 5, Logprobs: lp})
	if diff := cmp.Diff(wantLogprobs(ids, 3), out); diff != "" || len(ids) != 5 {
		t.Errorf("output logprobs of %d tokens (-want +got):\n%s", len(ids), diff)
	}
	want := append([]sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: 5, Unknown: true}}}, wantLogprobs(prompt[1:], 2)...)
	if diff := cmp.Diff(want, got); diff != "" || prompts != 1 {
		t.Errorf("prompt logprobs in %d chunks (-want +got):\n%s", prompts, diff)
	}
	wire := &vllmpb.ResponseOptions{
		OutputTokenIds: true, OutputLogprobs: true, PromptLogprobs: true, PromptTokenIds: true,
		OutputCandidates: &vllmpb.CandidateTokens{Select: &vllmpb.CandidateTokens_TopN{TopN: 3}},
		PromptCandidates: &vllmpb.CandidateTokens{Select: &vllmpb.CandidateTokens_TopN{TopN: 2}},
	}
	if diff := cmp.Diff(wire, lastRequest(t, e).GetResponse(), protocmp.Transform()); diff != "" {
		t.Errorf("ResponseOptions sent (-want +got):\n%s", diff)
	}
}

// TestGenerateLogprobsChosenOnly: Top 0 asks no candidates; each position
// has its sampled token alone. Without Logprobs nothing is asked or given.
func TestGenerateLogprobsChosenOnly(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	req := sdk.GenerateRequest{RequestID: "c", TokenIDs: []uint32{1, 2}, MaxTokens: 3, Logprobs: &sdk.Logprobs{Output: true}}
	ids, out, prompt, _ := generateLogprobs(t, addr, req)
	if diff := cmp.Diff(wantLogprobs(ids, 0), out); diff != "" || prompt != nil {
		t.Errorf("logprobs (-want +got):\n%s\nprompt logprobs %v, want none", diff, prompt)
	}
	if o := lastRequest(t, e).GetResponse(); o.OutputCandidates != nil || !o.OutputLogprobs || o.PromptLogprobs {
		t.Errorf("ResponseOptions sent %v, want output_logprobs alone", o)
	}
	req.Logprobs = nil
	if _, out, prompt, _ := generateLogprobs(t, addr, req); out != nil || prompt != nil {
		t.Errorf("without Logprobs: logprobs %v, prompt %v; want none", out, prompt)
	}
	if o := lastRequest(t, e).GetResponse(); o.OutputLogprobs || o.PromptLogprobs {
		t.Errorf("without Logprobs: ResponseOptions sent %v", o)
	}
}

// TestGenerateLogprobsRefused: past the engine's --max-logprobs, vLLM
// refuses before any output, in its words; the adapter says the request
// is invalid.
func TestGenerateLogprobsRefused(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{Model: "m", MaxLogprobs: 5})
	a := started(t, addr)
	tests := map[string]struct {
		lp   sdk.Logprobs
		want string
	}{
		"output": {sdk.Logprobs{Output: true, Top: 6}, "Requested sample logprobs of 6, which is greater than max allowed: 5"},
		"prompt": {sdk.Logprobs{Prompt: true, PromptTop: 9}, "Requested prompt logprobs of 9, which is greater than max allowed: 5"},
	}
	for name, tt := range tests {
		req := sdk.GenerateRequest{RequestID: name, TokenIDs: []uint32{1}, MaxTokens: 1, Logprobs: &tt.lp}
		_, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil })
		if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Generate = %v, want ErrInvalidArgument with %q", name, err, tt.want)
		}
	}
	req := sdk.GenerateRequest{RequestID: "at", TokenIDs: []uint32{1}, MaxTokens: 1, Logprobs: &sdk.Logprobs{Output: true, Top: 5, Prompt: true, PromptTop: 5}}
	if _, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil }); err != nil {
		t.Errorf("Generate at max-logprobs = %v, want nil", err)
	}
}
