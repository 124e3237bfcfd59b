package sglang_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// wantLogprobs is what the adapter gives for ids with k alternatives
// each: enginemock's top-k as SGLang sends it, each entry ranked by its
// place, the chosen token's rank known only when it is among them.
func wantLogprobs(ids []uint32, k int) []sdk.TokenLogprob {
	var out []sdk.TokenLogprob
	for _, id := range ids {
		d := enginemock.PositionLogprobs(id, k)
		t := sdk.TokenLogprob{Chosen: sdk.Logprob{TokenID: id, Logprob: d.Chosen.Logprob}}
		for _, e := range d.Top {
			t.Top = append(t.Top, sdk.Logprob{TokenID: e.TokenID, Logprob: e.Logprob, Rank: e.Rank})
			if e.TokenID == id {
				t.Chosen.Rank = e.Rank
			}
		}
		out = append(out, t)
	}
	return out
}

// wantPrompt is the prompt's logprobs: the first position Unknown.
func wantPrompt(prompt []uint32, k int) []sdk.TokenLogprob {
	return append([]sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: prompt[0], Unknown: true}}}, wantLogprobs(prompt[1:], k)...)
}

// generateLogprobs runs req on a started adapter, checking each chunk has
// one logprob entry per token id when asked, and returns the output's and
// the prompt's logprobs and how many chunks carried the prompt's.
func generateLogprobs(t *testing.T, addr string, req sdk.GenerateRequest) (ids []uint32, out, prompt []sdk.TokenLogprob, prompts int) {
	t.Helper()
	a := started(t, addr, nil)
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

// lastRequest is the engine's last GenerateRequest, as it came.
func lastRequest(t *testing.T, e *mock.Engine) *sglangpb.GenerateRequest {
	t.Helper()
	var req sglangpb.GenerateRequest
	if err := protojson.Unmarshal(e.State().LastRequest, &req); err != nil {
		t.Fatalf("last_request %s: %v", e.State().LastRequest, err)
	}
	return &req
}

// TestGenerateLogprobs: in either layout, output logprobs come from each
// chunk's meta_info, the prompt's once from the final message's (its
// first position [null, id, null], Unknown, or left out by an older
// SGLang and put back). One top_logprobs_num serves both: the larger is
// asked and each cut to its own.
func TestGenerateLogprobs(t *testing.T) {
	t.Parallel()
	prompt := []uint32{5, 6, 7, 8}
	for _, cfg := range []mock.Config{{TokensPerMessage: 2}, {Layout: mock.LayoutNew, TokensPerMessage: 2}, {OmitFirstPromptLogprob: true}} {
		e, addr := serveMock(t, cfg)
		lp := &sdk.Logprobs{Output: true, Top: 2, Prompt: true, PromptTop: 3}
		ids, out, got, prompts := generateLogprobs(t, addr, sdk.GenerateRequest{RequestID: "lp", TokenIDs: prompt, MaxTokens: 5, Logprobs: lp})
		if diff := cmp.Diff(wantLogprobs(ids, 2), out); diff != "" || len(ids) != 5 {
			t.Errorf("%+v: output logprobs of %d tokens (-want +got):\n%s", cfg, len(ids), diff)
		}
		if diff := cmp.Diff(wantPrompt(prompt, 3), got); diff != "" || prompts != 1 {
			t.Errorf("%+v: prompt logprobs in %d chunks (-want +got):\n%s", cfg, prompts, diff)
		}
		w := lastRequest(t, e)
		if !w.GetReturnLogprob() || w.TopLogprobsNum == nil || w.GetTopLogprobsNum() != 3 || w.LogprobStartLen == nil || w.GetLogprobStartLen() != 0 {
			t.Errorf("%+v: sent return_logprob %v, top_logprobs_num %v, logprob_start_len %v; want true, 3, 0",
				cfg, w.ReturnLogprob, w.TopLogprobsNum, w.LogprobStartLen)
		}
	}
}

// TestGenerateLogprobsOne: output alone asks no prompt positions
// (logprob_start_len -1); Top 0 asks no top_logprobs_num and gives the
// chosen token alone. The prompt alone gives no output logprobs; neither
// asks none.
func TestGenerateLogprobsOne(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{})
	req := sdk.GenerateRequest{RequestID: "o", TokenIDs: []uint32{1, 2}, MaxTokens: 3, Logprobs: &sdk.Logprobs{Output: true}}
	ids, out, prompt, _ := generateLogprobs(t, addr, req)
	if diff := cmp.Diff(wantLogprobs(ids, 0), out); diff != "" || prompt != nil {
		t.Errorf("output alone: logprobs (-want +got):\n%s\nprompt %v, want none", diff, prompt)
	}
	if w := lastRequest(t, e); w.TopLogprobsNum != nil || w.GetLogprobStartLen() != -1 || !w.GetReturnLogprob() {
		t.Errorf("output alone: sent top_logprobs_num %v, logprob_start_len %v, return_logprob %v", w.TopLogprobsNum, w.LogprobStartLen, w.ReturnLogprob)
	}
	req.Logprobs = &sdk.Logprobs{Prompt: true}
	_, out, prompt, _ = generateLogprobs(t, addr, req)
	if diff := cmp.Diff(wantPrompt(req.TokenIDs, 0), prompt); diff != "" || out != nil {
		t.Errorf("prompt alone: prompt logprobs (-want +got):\n%s\noutput %v, want none", diff, out)
	}
	req.Logprobs = &sdk.Logprobs{}
	if _, out, prompt, _ = generateLogprobs(t, addr, req); out != nil || prompt != nil || lastRequest(t, e).ReturnLogprob != nil {
		t.Errorf("no logprobs asked: got %v, %v, return_logprob %v", out, prompt, lastRequest(t, e).ReturnLogprob)
	}
}
