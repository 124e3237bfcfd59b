package sdk

import pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"

// Logprobs asks for log probabilities. The host sets
// GenerateRequest.Logprobs only for an adapter whose Worker.Accepts lists
// "logprobs=N" (output) or "prompt_logprobs=N" (prompt), N the most
// alternatives per position the engine returns, and never asks for more.
type Logprobs struct {
	// Output: each output token's log probability, in Chunk.Logprobs.
	Output bool
	// Top is how many likeliest tokens to return per output position
	// (OpenAI's top_logprobs); 0 means only the chosen token.
	Top uint32
	// Prompt: each prompt token's log probability, in
	// Chunk.PromptLogprobs.
	Prompt bool
	// PromptTop is Top for prompt positions.
	PromptTop uint32
}

// TokenLogprob is one position's chosen token and the likeliest tokens
// there, as the engine gives them: ids and numbers, since the host adds
// each token's text from its tokenizer.
type TokenLogprob struct {
	// Chosen is the sampled token (the prompt's token, for a prompt
	// position).
	Chosen Logprob
	// Top are the likeliest tokens at the position, most likely first, at
	// most Logprobs.Top of them. They may include Chosen's token or not,
	// as the engine gives them: the host merges Chosen in.
	Top []Logprob
}

// Logprob is one token's log probability at a position.
type Logprob struct {
	TokenID uint32
	// Logprob is the natural log of the token's probability, <= 0.
	Logprob float32
	// Unknown: the engine gave no log probability, and Logprob means
	// nothing. The prompt's first position has none; TensorRT-LLM reports
	// a chosen token outside its top-k as 0.0, which its adapter marks
	// Unknown.
	Unknown bool
	// Rank is the token's rank at the position, 1 the likeliest; 0 when
	// the engine gives none.
	Rank uint32
}

func logprobsToProto(l *Logprobs) *pluginv1.Logprobs {
	if l == nil {
		return nil
	}
	return &pluginv1.Logprobs{Output: l.Output, Top: l.Top, Prompt: l.Prompt, PromptTop: l.PromptTop}
}

func logprobsFromProto(p *pluginv1.Logprobs) *Logprobs {
	if p == nil {
		return nil
	}
	return &Logprobs{Output: p.GetOutput(), Top: p.GetTop(), Prompt: p.GetPrompt(), PromptTop: p.GetPromptTop()}
}

func tokenLogprobsToProto(ls []TokenLogprob) []*pluginv1.TokenLogprob {
	if len(ls) == 0 {
		return nil
	}
	out := make([]*pluginv1.TokenLogprob, len(ls))
	for i, l := range ls {
		p := &pluginv1.TokenLogprob{Chosen: logprobToProto(l.Chosen)}
		if len(l.Top) > 0 {
			p.Top = make([]*pluginv1.Logprob, len(l.Top))
			for j, t := range l.Top {
				p.Top[j] = logprobToProto(t)
			}
		}
		out[i] = p
	}
	return out
}

func logprobToProto(l Logprob) *pluginv1.Logprob {
	p := &pluginv1.Logprob{TokenId: l.TokenID, Rank: l.Rank}
	if !l.Unknown {
		p.Logprob = &l.Logprob
	}
	return p
}

func tokenLogprobsFromProto(ps []*pluginv1.TokenLogprob) []TokenLogprob {
	if len(ps) == 0 {
		return nil
	}
	out := make([]TokenLogprob, len(ps))
	for i, p := range ps {
		out[i].Chosen = logprobFromProto(p.GetChosen())
		if top := p.GetTop(); len(top) > 0 {
			out[i].Top = make([]Logprob, len(top))
			for j, t := range top {
				out[i].Top[j] = logprobFromProto(t)
			}
		}
	}
	return out
}

func logprobFromProto(p *pluginv1.Logprob) Logprob {
	return Logprob{TokenID: p.GetTokenId(), Logprob: p.GetLogprob(), Unknown: p.Logprob == nil, Rank: p.GetRank()}
}

// logprobsSize is what ls weighs in a chunkQueue's bound: a token id and
// a float per entry.
func logprobsSize(ls []TokenLogprob) int {
	n := 0
	for _, l := range ls {
		n += 8 * (1 + len(l.Top))
	}
	return n
}

// chunkFromProto is a Generate stream message's output: a chunk, or the
// prompt as a chunk of PromptLogprobs only.
func chunkFromProto(msg *pluginv1.GenerateResponse) Chunk {
	if p := msg.GetPrompt(); p != nil {
		return Chunk{PromptLogprobs: promptLogprobsFromProto(p)}
	}
	ch := msg.GetChunk()
	return Chunk{TokenIDs: ch.GetTokenIds(), Text: ch.GetText(), Logprobs: tokenLogprobsFromProto(ch.GetLogprobs())}
}

// promptLogprobsFromProto is a prompt's logprobs, never nil for a prompt
// message, so that an empty one still arrives.
func promptLogprobsFromProto(p *pluginv1.PromptInfo) []TokenLogprob {
	if p == nil {
		return nil
	}
	if l := tokenLogprobsFromProto(p.GetLogprobs()); l != nil {
		return l
	}
	return []TokenLogprob{}
}
