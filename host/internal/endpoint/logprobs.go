package endpoint

import (
	"cmp"
	"slices"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// LogprobTokens is what a wrapped engine with the model's tokenizer
// (package textgen) gives logprobs their token text with: the engine gives
// ids and numbers only.
type LogprobTokens interface {
	// CanLogprob reports whether LogprobToken is served.
	CanLogprob() bool
	// LogprobToken is id's text and bytes as a logprob shows them, at a
	// position after the chosen tokens before (the last few suffice).
	LogprobToken(before []uint32, id uint32) (text string, raw []byte)
}

// logprobTokens is engine's LogprobTokens, nil when it gives no token
// text.
func logprobTokens(engine sdk.Generator) LogprobTokens {
	if l, ok := engine.(LogprobTokens); ok && l.CanLogprob() {
		return l
	}
	return nil
}

// checkLogprobs refuses logprobs the worker does not give, or more
// alternatives than it gives, naming the field and the OpenAI parameter.
func checkLogprobs(lp *workerv1.Logprobs, a accepts) error {
	for _, f := range []struct {
		on                      bool
		top                     uint32
		name, field, topF, what string
	}{
		{lp.GetOutput(), lp.GetTop(), discovery.CapLogprobs, "logprobs.output", "logprobs.top", "logprobs (chat's top_logprobs)"},
		{lp.GetPrompt(), lp.GetPromptTop(), discovery.CapPromptLogprobs, "logprobs.prompt", "logprobs.prompt_top", "the prompt's logprobs (completions' echo with logprobs)"},
	} {
		if !f.on {
			continue
		}
		most, ok := a.logprobs[f.name]
		switch {
		case !ok && !a.tokenizer:
			return status.Errorf(codes.InvalidArgument, "%s: this worker gives no %s: it has no tokenizer to give the tokens' text; "+
				"start vigil run with --tokenizer-dir DIR, or omit it", f.field, f.what)
		case !ok:
			return lacks(f.field, f.what)
		case most != 0 && f.top > most:
			return status.Errorf(codes.InvalidArgument, "%s: %d alternatives a position exceeds the most this worker's engine returns, %d (%s)", f.topF, f.top, most, f.what)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logprobsToEngine is lp as the adapter takes it; nil for none.
func logprobsToEngine(lp *workerv1.Logprobs) *sdk.Logprobs {
	if !lp.GetOutput() && !lp.GetPrompt() {
		return nil
	}
	l := &sdk.Logprobs{Output: lp.GetOutput(), Prompt: lp.GetPrompt()}
	if l.Output {
		l.Top = lp.GetTop()
	}
	if l.Prompt {
		l.PromptTop = lp.GetPromptTop()
	}
	return l
}

// logprobOut is one request's logprobs on the way out: the token text of
// each, and the prompt's logprobs, which the output waits for.
type logprobOut struct {
	tokens         LogprobTokens
	top, promptTop uint32
	before         [][]uint32 // per choice: the last chosen ids, the context of the next
	prompt         *workerv1.Prompt
	promptLogprobs bool                         // the request asks for the prompt's logprobs
	held           []*workerv1.GenerateResponse // chunks held until the prompt is sent
	promptSent     bool
}

// newLogprobOut is req's logprobs' state, nil when it asks for none.
func newLogprobOut(req sdk.GenerateRequest, tokens LogprobTokens, n uint32) *logprobOut {
	l := req.Logprobs
	if l == nil || tokens == nil {
		return nil
	}
	return &logprobOut{tokens: tokens, top: l.Top, promptTop: l.PromptTop, before: make([][]uint32, max(n, 1)), promptLogprobs: l.Prompt}
}

// convert is choice i's logprobs in the worker API, token text added.
func (o *logprobOut) convert(i uint32, lps []sdk.TokenLogprob) []*workerv1.TokenLogprob {
	if o == nil || len(lps) == 0 {
		return nil
	}
	out := o.positions(o.before[i], lps, o.top)
	b := append(o.before[i], make([]uint32, 0, len(lps))...)
	for _, lp := range lps {
		b = append(b, lp.Chosen.TokenID)
	}
	if len(b) > maxContext {
		b = append([]uint32(nil), b[len(b)-maxContext:]...)
	}
	o.before[i] = b
	return out
}

// maxContext is how many chosen tokens before a position its token text
// may need (a character's bytes, less one).
const maxContext = 4

// positions converts lps, the positions after before, with top
// alternatives each at most: before grows by each chosen token.
func (o *logprobOut) positions(before []uint32, lps []sdk.TokenLogprob, top uint32) []*workerv1.TokenLogprob {
	ctx := append([]uint32(nil), before...)
	out := make([]*workerv1.TokenLogprob, len(lps))
	for k, lp := range lps {
		p := &workerv1.TokenLogprob{Chosen: o.logprob(ctx, lp.Chosen)}
		for _, t := range mergeTop(lp.Chosen, lp.Top, top) {
			p.Top = append(p.Top, o.logprob(ctx, t))
		}
		out[k] = p
		ctx = append(ctx, lp.Chosen.TokenID)
		if len(ctx) > maxContext {
			ctx = ctx[len(ctx)-maxContext:]
		}
	}
	return out
}

func (o *logprobOut) logprob(before []uint32, l sdk.Logprob) *workerv1.Logprob {
	text, raw := o.tokens.LogprobToken(before, l.TokenID)
	p := &workerv1.Logprob{TokenId: l.TokenID, Token: text, Bytes: raw, Rank: l.Rank}
	if !l.Unknown {
		p.Logprob = proto.Float32(l.Logprob)
	}
	return p
}

// mergeTop is a position's top alternatives with the chosen token among
// them where it belongs, most likely first, at most n: the engine's may
// leave it out (vLLM's do).
func mergeTop(chosen sdk.Logprob, top []sdk.Logprob, n uint32) []sdk.Logprob {
	out := make([]sdk.Logprob, 0, len(top)+1)
	found := false
	for _, t := range top {
		found = found || t.TokenID == chosen.TokenID
		out = append(out, t)
	}
	if !found && !chosen.Unknown {
		out = append(out, chosen)
	}
	slices.SortStableFunc(out, func(a, b sdk.Logprob) int {
		if a.Unknown || b.Unknown {
			return b2i(a.Unknown) - b2i(b.Unknown)
		}
		return cmp.Compare(b.Logprob, a.Logprob)
	})
	if uint32(len(out)) > n {
		out = out[:n]
	}
	return out
}

// promptMessage is the prompt message with lps, the prompt's logprobs,
// converted.
func (o *logprobOut) promptMessage(lps []sdk.TokenLogprob) *workerv1.GenerateResponse {
	pr := o.prompt
	if len(lps) > 0 {
		pr.Logprobs = o.positions(nil, lps, o.promptTop)
	}
	return &workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: pr}}
}
