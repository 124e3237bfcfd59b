package sdktest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/sdk"
)

// acceptsTop is the number N of item name=N in a Worker.Accepts list; 0
// when it is not listed.
func acceptsTop(accepts, name string) uint32 {
	for _, it := range strings.Split(accepts, ",") {
		if v, ok := strings.CutPrefix(it, name+"="); ok {
			n, _ := strconv.ParseUint(v, 10, 32)
			return uint32(n)
		}
	}
	return 0
}

// checkGenerateLogprobs asks an adapter whose Worker.Accepts lists
// logprobs=N (and prompt_logprobs=M) for them, with up to 2 alternatives,
// and holds the answer to sdk.Chunk's contract.
func checkGenerateLogprobs(t tb, k *kit) {
	e := k.engine(t)
	g, _ := k.generator(t, e)
	if k.h.GenerateUnavailable {
		t.Skip("Harness.GenerateUnavailable: the engine takes no requests")
	}
	addr, _ := k.serving(t)
	w := k.started(t, e, addr)
	top, promptTop := acceptsTop(w.Accepts, "logprobs"), acceptsTop(w.Accepts, "prompt_logprobs")
	if top == 0 && promptTop == 0 {
		t.Skipf("Worker.Accepts %q lists neither logprobs=N nor prompt_logprobs=N", w.Accepts)
	}
	req := request(newRequestID())
	req.Logprobs = &sdk.Logprobs{Output: top > 0, Top: min(top, 2), Prompt: promptTop > 0, PromptTop: min(promptTop, 2)}
	var problems []string
	prompts := 0
	rec := newRecorder(req.RequestID)
	rec.check = func(c sdk.Chunk) {
		if req.Logprobs.Output {
			problems = append(problems, outputProblems(c, req.Logprobs.Top)...)
		}
		if c.PromptLogprobs != nil {
			prompts++
			problems = append(problems, promptProblems(c.PromptLogprobs, req)...)
		}
	}
	o, _ := receive(t, generate(g, t.Context(), req, rec), within, "return of Generate")
	if o.err != nil {
		t.Fatalf("Generate(%s) with Logprobs %+v error = %v, want nil", req.RequestID, *req.Logprobs, o.err)
	}
	rec.report(t)
	if want := btoi(req.Logprobs.Prompt); prompts != want {
		problems = append(problems, fmt.Sprintf("PromptLogprobs came in %d chunks, want %d", prompts, want))
	}
	for _, p := range problems {
		t.Errorf("Generate(%s) with Logprobs %+v: %s", req.RequestID, *req.Logprobs, p)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// outputProblems holds a chunk's Logprobs to the contract: one per token
// id, in order.
func outputProblems(c sdk.Chunk, top uint32) []string {
	if len(c.Logprobs) != len(c.TokenIDs) {
		return []string{fmt.Sprintf("a chunk of %d token ids has %d Logprobs, want one per token id", len(c.TokenIDs), len(c.Logprobs))}
	}
	var out []string
	for i, l := range c.Logprobs {
		if l.Chosen.TokenID != c.TokenIDs[i] {
			out = append(out, fmt.Sprintf("Logprobs[%d].Chosen is token %d, the chunk's token id there is %d", i, l.Chosen.TokenID, c.TokenIDs[i]))
		}
		out = append(out, positionProblems(fmt.Sprintf("Logprobs[%d]", i), l, top)...)
	}
	return out
}

// promptProblems holds PromptLogprobs to the contract: one per prompt
// token, the first Unknown.
func promptProblems(p []sdk.TokenLogprob, req sdk.GenerateRequest) []string {
	if len(p) != len(req.TokenIDs) {
		return []string{fmt.Sprintf("PromptLogprobs has %d entries, the prompt %d tokens: want one per prompt token", len(p), len(req.TokenIDs))}
	}
	var out []string
	if !p[0].Chosen.Unknown {
		out = append(out, "PromptLogprobs[0].Chosen is not Unknown: the prompt's first position has no log probability")
	}
	for i, l := range p {
		if l.Chosen.TokenID != req.TokenIDs[i] {
			out = append(out, fmt.Sprintf("PromptLogprobs[%d].Chosen is token %d, the prompt's is %d", i, l.Chosen.TokenID, req.TokenIDs[i]))
		}
		out = append(out, positionProblems(fmt.Sprintf("PromptLogprobs[%d]", i), l, req.Logprobs.PromptTop)...)
	}
	return out
}

// positionProblems: at most top alternatives, every known log
// probability finite and at most 0, the alternatives most likely first.
func positionProblems(where string, l sdk.TokenLogprob, top uint32) []string {
	var out []string
	if !l.Chosen.Unknown && !validLogprob(l.Chosen.Logprob) {
		out = append(out, fmt.Sprintf("%s.Chosen.Logprob = %v, want a finite number <= 0 or Unknown", where, l.Chosen.Logprob))
	}
	if uint32(len(l.Top)) > top {
		out = append(out, fmt.Sprintf("%s has %d Top entries, want at most the %d asked", where, len(l.Top), top))
	}
	for j, e := range l.Top {
		switch {
		case e.Unknown || !validLogprob(e.Logprob):
			out = append(out, fmt.Sprintf("%s.Top[%d] = %+v, want a finite log probability <= 0", where, j, e))
		case j > 0 && e.Logprob > l.Top[j-1].Logprob:
			out = append(out, fmt.Sprintf("%s.Top[%d] is likelier than Top[%d], want the likeliest first", where, j, j-1))
		}
	}
	return out
}

func validLogprob(l float32) bool {
	return l <= 0 && !math.IsInf(float64(l), 0) && !math.IsNaN(float64(l))
}
