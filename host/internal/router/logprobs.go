package router

import (
	"bytes"
	"encoding/json"
	"strconv"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
)

// maxTopLogprobs is chat's most top_logprobs, OpenAI's limit.
const maxTopLogprobs = 20

// setLogprobs maps chat's logprobs and top_logprobs, or completions'
// logprobs (with echo, the prompt's too), onto req. Completions' logprobs
// has no limit of its own, as vLLM's: the workers' capability
// (logprobs=N) is the limit.
func (c *request) setLogprobs(endpoint string, req *workerv1.GenerateRequest, p *parsed) *apiError {
	raw := bytes.TrimSpace(c.Logprobs)
	if endpoint == endpointChat {
		on := false
		if !isNull(raw) && json.Unmarshal(raw, &on) != nil {
			return badRequest("logprobs", "logprobs: want a boolean, got %s", clip(raw))
		}
		p.names.logprobs = "logprobs"
		var top int64
		if c.TopLogprobs != nil {
			top = *c.TopLogprobs
			switch {
			case top < 0 || top > maxTopLogprobs:
				return badRequest("top_logprobs", "top_logprobs: want an integer from 0 to %d, got %d", maxTopLogprobs, top)
			case top > 0 && !on:
				return badRequest("top_logprobs", "top_logprobs: logprobs must be true when top_logprobs is used")
			case top > 0:
				p.names.logprobs = "top_logprobs"
			}
		}
		if on {
			p.logprobs, p.top = true, uint32(top)
			req.Logprobs = &workerv1.Logprobs{Output: true, Top: p.top}
		}
		return nil
	}
	if isNull(raw) || bytes.Equal(raw, []byte("false")) {
		return nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 32)
	if err != nil {
		return badRequest("logprobs", "logprobs: want an integer from 0 (the chosen token's only) up to the most alternatives the model's workers return, got %s", clip(raw))
	}
	p.logprobs, p.top, p.names.logprobs = true, uint32(n), "logprobs"
	req.Logprobs = &workerv1.Logprobs{Output: true, Top: p.top}
	if p.echo {
		p.promptLogprobs = true
		req.Logprobs.Prompt, req.Logprobs.PromptTop = true, p.top
	}
	return nil
}

// chatLogprobs is a chat choice's logprobs, whole or one stream event's:
// OpenAI's {content, refusal}.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal *string       `json:"refusal"`
}

// chatLogprob is one position: the chosen token and the likeliest ones.
type chatLogprob struct {
	chatTop
	TopLogprobs []chatTop `json:"top_logprobs"`
}

// chatTop is one token of a position.
type chatTop struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// logprobFloor is what a logprob the engine could not give shows as in
// chat (TensorRT-LLM's chosen token outside its top-k), and the least any
// logprob shows as: vLLM's floor for one it cannot represent (-inf).
const logprobFloor = -9999.0

func chatTopOf(l *workerv1.Logprob) chatTop {
	t := chatTop{Token: l.GetToken(), Logprob: logprobFloor, Bytes: make([]int, len(l.GetBytes()))}
	if l.Logprob != nil {
		t.Logprob = max(float64(l.GetLogprob()), logprobFloor)
	}
	for i, b := range l.GetBytes() {
		t.Bytes[i] = int(b)
	}
	return t
}

// chatLogprobsOf is lps as chat's logprobs.
func chatLogprobsOf(lps []*workerv1.TokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatLogprob, len(lps))}
	for i, p := range lps {
		c := chatLogprob{chatTop: chatTopOf(p.GetChosen()), TopLogprobs: make([]chatTop, len(p.GetTop()))}
		for j, t := range p.GetTop() {
			c.TopLogprobs[j] = chatTopOf(t)
		}
		out.Content[i] = c
	}
	return out
}

// completionLogprobs is a completions choice's logprobs, whole or one
// stream event's: OpenAI's legacy {tokens, token_logprobs, top_logprobs,
// text_offset}. A logprob the engine could not give is null.
type completionLogprobs struct {
	Tokens        []string    `json:"tokens"`
	TokenLogprobs []*float64  `json:"token_logprobs"`
	TopLogprobs   []topTokens `json:"top_logprobs"`
	TextOffset    []int       `json:"text_offset"`
}

// topTokens is a position's tokens as a JSON object of token text to
// logprob, in order: the chosen token first, then the likeliest (vLLM's
// order); null for the prompt's first position.
type topTokens []topToken

type topToken struct {
	token   string
	logprob *float64
}

func (t topTokens) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, e := range t {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(e.token)
		v, _ := json.Marshal(e.logprob)
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func completionLogprob(l *workerv1.Logprob) *float64 {
	if l.Logprob == nil {
		return nil
	}
	return new(max(float64(l.GetLogprob()), logprobFloor))
}

// add appends lps, offset the text's length (characters) before them,
// which it advances; prompt: the prompt's, whose first position has none.
func (c *completionLogprobs) add(lps []*workerv1.TokenLogprob, offset *int, prompt bool) {
	for i, p := range lps {
		ch := p.GetChosen()
		c.Tokens = append(c.Tokens, ch.GetToken())
		c.TextOffset = append(c.TextOffset, *offset)
		*offset += len([]rune(ch.GetToken()))
		if prompt && i == 0 {
			c.TokenLogprobs, c.TopLogprobs = append(c.TokenLogprobs, nil), append(c.TopLogprobs, nil)
			continue
		}
		c.TokenLogprobs = append(c.TokenLogprobs, completionLogprob(ch))
		top := topTokens{{ch.GetToken(), completionLogprob(ch)}}
		seen := map[string]bool{ch.GetToken(): true}
		for _, t := range p.GetTop() {
			if !seen[t.GetToken()] {
				seen[t.GetToken()] = true
				top = append(top, topToken{t.GetToken(), completionLogprob(t)})
			}
		}
		c.TopLogprobs = append(c.TopLogprobs, top)
	}
}

// newCompletionLogprobs is an empty completions logprobs, its lists [].
func newCompletionLogprobs() *completionLogprobs {
	return &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []topTokens{}, TextOffset: []int{}}
}
