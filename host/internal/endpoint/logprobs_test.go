package endpoint

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"github.com/vigilhq/vigil/host/internal/tokenizer"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lpEngine answers out, perChunk tokens a chunk (0: 1), each position's
// logprobs as vLLM gives them: the chosen token's (rank 2) and the
// alternatives other than it, 100 (the likeliest) and 200; with the
// prompt's logprobs asked, they come last (promptLast, as SGLang's) or
// first.
type lpEngine struct {
	out        []uint32
	perChunk   int
	promptLast bool
	mu         sync.Mutex
	last       sdk.GenerateRequest
}

func lpAt(id uint32, k int) sdk.TokenLogprob {
	return sdk.TokenLogprob{
		Chosen: sdk.Logprob{TokenID: id, Logprob: -0.5 - float32(k), Rank: 2},
		Top:    []sdk.Logprob{{TokenID: 100, Logprob: -0.25, Rank: 1}, {TokenID: 200, Logprob: -9, Rank: 3}},
	}
}

func (f *lpEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	f.mu.Lock()
	f.last = req
	f.mu.Unlock()
	var prompt []sdk.TokenLogprob
	if req.Logprobs != nil && req.Logprobs.Prompt {
		prompt = []sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: req.TokenIDs[0], Unknown: true}}}
		for k, id := range req.TokenIDs[1:] {
			prompt = append(prompt, lpAt(id, k))
		}
		if !f.promptLast {
			if err := send(sdk.Chunk{PromptLogprobs: prompt}); err != nil {
				return sdk.Result{}, err
			}
		}
	}
	n := max(f.perChunk, 1)
	for i := 0; i < len(f.out); i += n {
		c := sdk.Chunk{TokenIDs: f.out[i:min(i+n, len(f.out))]}
		if req.Logprobs != nil && req.Logprobs.Output {
			for k, id := range c.TokenIDs {
				c.Logprobs = append(c.Logprobs, lpAt(id, i+k))
			}
		}
		if err := send(c); err != nil {
			return sdk.Result{}, err
		}
	}
	if f.promptLast && prompt != nil {
		if err := send(sdk.Chunk{PromptLogprobs: prompt}); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: uint32(len(req.TokenIDs)), CompletionTokens: uint32(len(f.out))}, nil
}

func (f *lpEngine) Abort(context.Context, []string) error { return nil }

// lpServe serves e as a vLLM worker with Llama 3's tokenizer.
func lpServe(t *testing.T, e sdk.Generator, tok *tokenizer.Tokenizer, accepts ...string) workerv1.WorkerClient {
	t.Helper()
	s, c := serve(t, e, accepting(accepts...), 0)
	s.Wrap(tokenized(textgen.HF(tok), 4096))
	s.Admit(true, "")
	if got := s.Capabilities().String(); !strings.Contains(got, "logprobs=20") {
		t.Fatalf("capabilities %q, want logprobs=20", got)
	}
	return c
}

// lpText is a position as the test compares it: the chosen token's text,
// logprob and bytes, then each alternative's text.
func lpText(p *workerv1.TokenLogprob) string {
	var b strings.Builder
	c := p.GetChosen()
	lp := "unknown"
	if c.Logprob != nil {
		lp = strconv.FormatFloat(float64(c.GetLogprob()), 'g', -1, 32)
	}
	b.WriteString(c.GetToken() + "|" + lp + "|" + string(c.GetBytes()) + "|")
	for _, t := range p.GetTop() {
		b.WriteString(" " + t.GetToken())
	}
	return b.String()
}

// chunksOf are the stream's chunks' texts and logprobs, and its prompt.
func chunksOf(t *testing.T, msgs []*workerv1.GenerateResponse) (texts []string, lps [][]string, prompt *workerv1.Prompt) {
	t.Helper()
	for i, m := range msgs {
		if p := m.GetPrompt(); p != nil {
			if i != 0 {
				t.Errorf("prompt message at %d, want first", i)
			}
			prompt = p
		}
		if c := m.GetChunk(); c != nil {
			texts = append(texts, c.GetText())
			var l []string
			for _, p := range c.GetLogprobs() {
				l = append(l, lpText(p))
			}
			lps = append(lps, l)
		}
	}
	return texts, lps, prompt
}

// Each token's logprob carries its text and bytes from vigil's tokenizer,
// as vLLM shows them: a byte-level token's own text, the bytes of a
// character cut across tokens with the character's text on the token
// that completes it, and the alternatives with the chosen token merged
// in, most likely first, cut to top.
func TestLogprobsTokenText(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	hello, _ := tok.Encode("Hello world", false)
	llama, _ := tok.Encode("🦙", false)
	e := &lpEngine{out: append(hello, llama...)}
	c := lpServe(t, e, tok, "logprobs=20", "prompt_logprobs=20")
	req := text("Say hello")
	req.Logprobs = &workerv1.Logprobs{Output: true, Top: 2}
	msgs, err := all(t.Context(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	l := e.last.Logprobs
	e.mu.Unlock()
	if l == nil || !l.Output || l.Top != 2 || l.Prompt {
		t.Errorf("engine logprobs %+v, want output with top 2", l)
	}
	texts, lps, _ := chunksOf(t, msgs)
	if got := strings.Join(texts, ""); got != "Hello world🦙" {
		t.Errorf("text %q", got)
	}
	var got []string
	for _, l := range lps {
		got = append(got, l...)
	}
	// 100 is a byte of a character in Llama 3's vocabulary: alone it
	// shows as "", after the chosen bytes of 🦙 it completes 🦧.
	want := []string{"Hello|-0.5|Hello|  Hello", " world|-1.5| world|   world",
		"|-2.5|\xf0\x9f|  ", "|-3.5|\xa6|  ", "🦙|-4.5|\x99| 🦧 🦙"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logprobs (-want +got):\n%s", diff)
	}
}

// Logprobs the worker does not give are refused naming the field: none
// without a tokenizer (which gives the token text, so the worker lists
// no logprobs), more alternatives than the engine returns.
func TestLogprobsRefused(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	bare, bareC := serve(t, &lpEngine{out: []uint32{1}}, accepting("logprobs=20", "prompt_logprobs=20"), 0)
	if got := bare.Capabilities().String(); strings.Contains(got, "logprobs") {
		t.Errorf("without a tokenizer: capabilities %q, want no logprobs", got)
	}
	bare.Admit(true, "")
	req := prompt(1)
	req.Logprobs = &workerv1.Logprobs{Output: true}
	if _, err := all(t.Context(), bareC, req); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), "logprobs.output: this worker gives no logprobs") ||
		!strings.Contains(status.Convert(err).Message(), "--tokenizer-dir") {
		t.Errorf("without a tokenizer: %v, want InvalidArgument naming logprobs and --tokenizer-dir", err)
	}
	withTok := lpServe(t, &lpEngine{out: []uint32{1}}, tok, "logprobs=20")
	for _, c := range []struct {
		name    string
		lp      *workerv1.Logprobs
		refusal string
	}{
		{"top over the engine's", &workerv1.Logprobs{Output: true, Top: 21}, "logprobs.top: 21 alternatives a position exceeds the most this worker's engine returns, 20"},
		{"prompt without prompt_logprobs", &workerv1.Logprobs{Prompt: true}, "logprobs.prompt: this worker does not take the prompt's logprobs"},
	} {
		req := text("hi")
		req.Logprobs = c.lp
		_, err := all(t.Context(), withTok, req)
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), c.refusal) {
			t.Errorf("%s: %v, want InvalidArgument beginning %q", c.name, err, c.refusal)
		}
	}
}

// Logprobs follow the text the client sees: a chunk whose text is held
// (the possible start of a stop string) holds its tokens' logprobs, which
// come with the text once it is emitted, and the tokens a stop string
// cuts lose theirs.
func TestLogprobsFollowText(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	out, _ := tok.Encode("Hello world! This is the end.", false)
	e := &lpEngine{out: out}
	c := lpServe(t, e, tok, "logprobs=20")
	req := text("Say hello")
	req.Logprobs = &workerv1.Logprobs{Output: true}
	// " world!" is held as the start of " world!?", then emitted with
	// " This"; the stop string " is" cuts its token.
	req.Stopping = &workerv1.Stopping{Stop: []string{" world!?", " is"}}
	msgs, err := all(t.Context(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	texts, lps, _ := chunksOf(t, msgs)
	var got []string
	for i, tx := range texts {
		var toks []string
		for _, l := range lps[i] {
			toks = append(toks, strings.Split(l, "|")[0])
		}
		got = append(got, tx+"="+strings.Join(toks, "+"))
	}
	want := []string{"Hello=Hello", "=", "=", " world! This= world+!+ This", "="}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks as text=logprobs' tokens (-want +got):\n%s", diff)
	}
}

// The prompt's logprobs come in the prompt message, first, whether the
// engine gives them first or last (the output is held until then): the
// first position has no logprob.
func TestPromptLogprobs(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	for _, last := range []bool{false, true} {
		e := &lpEngine{out: []uint32{0}, promptLast: last}
		c := lpServe(t, e, tok, "logprobs=20", "prompt_logprobs=5")
		req := text("Hello world")
		req.Logprobs = &workerv1.Logprobs{Output: true, Top: 1, Prompt: true, PromptTop: 1}
		msgs, err := all(t.Context(), c, req)
		if err != nil {
			t.Fatal(err)
		}
		texts, lps, pr := chunksOf(t, msgs)
		var got []string
		for _, p := range pr.GetLogprobs() {
			got = append(got, lpText(p))
		}
		want := []string{"Hello|unknown|Hello|", " world|-0.5| world| "}
		if diff := cmp.Diff(want, got); diff != "" || pr.GetText() != "Hello world" {
			t.Errorf("prompt last %v: prompt %q, logprobs (-want +got):\n%s", last, pr.GetText(), diff)
		}
		if strings.Join(texts, "") != "!" || len(lps) != 1 || len(lps[0]) != 1 {
			t.Errorf("prompt last %v: output %q, logprobs %q", last, texts, lps)
		}
	}
}

// With the prompt's logprobs given last, a stop string does not end the
// engine's request before they come; what the engine generates after it
// sends nothing (no empty chunks), and the prompt's logprobs arrive.
func TestPromptLogprobsAfterStopString(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	out, _ := tok.Encode("one STOP two three four five six seven", false)
	e := &lpEngine{out: out, promptLast: true}
	c := lpServe(t, e, tok, "logprobs=20", "prompt_logprobs=5")
	req := text("Hello world")
	req.Logprobs = &workerv1.Logprobs{Output: true, Prompt: true}
	req.Stopping = &workerv1.Stopping{Stop: []string{" STOP"}}
	msgs, err := all(t.Context(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	texts, _, pr := chunksOf(t, msgs)
	if strings.Join(texts, "") != "one" || len(pr.GetLogprobs()) != 2 {
		t.Errorf("output %q, prompt logprobs %d; want %q and the prompt's 2", texts, len(pr.GetLogprobs()), "one")
	}
	for i, m := range msgs {
		if ch := m.GetChunk(); ch != nil && len(ch.GetTokenIds()) == 0 && ch.GetText() == "" && len(ch.GetLogprobs()) == 0 {
			t.Errorf("message %d is an empty chunk, of output dropped after the stop string", i)
		}
	}
}

// With n, each choice has its own logprobs.
func TestLogprobsPerChoice(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	e := &lpEngine{out: []uint32{9906, 1917}}
	c := lpServe(t, e, tok, "logprobs=20", "prompt_logprobs=20")
	req := text("Say hello")
	req.N = 3
	req.Logprobs = &workerv1.Logprobs{Output: true}
	msgs, err := all(t.Context(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	per := map[uint32][]string{}
	for _, m := range msgs {
		for _, p := range m.GetChunk().GetLogprobs() {
			per[m.GetChunk().GetIndex()] = append(per[m.GetChunk().GetIndex()], p.GetChosen().GetToken())
		}
	}
	want := map[uint32][]string{0: {"Hello", " world"}, 1: {"Hello", " world"}, 2: {"Hello", " world"}}
	if diff := cmp.Diff(want, per); diff != "" {
		t.Errorf("chosen tokens per choice (-want +got):\n%s", diff)
	}
	// The prompt's logprobs, which each choice's engine request gives,
	// come once, in the prompt message, and no chunk is sent for them.
	req.Logprobs.Prompt = true
	msgs, err = all(t.Context(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	prompts, chunks := 0, 0
	for _, m := range msgs {
		switch {
		case m.GetPrompt() != nil:
			prompts++
		case m.GetChunk() != nil:
			chunks++
		}
	}
	if prompts != 1 || chunks != 6 {
		t.Errorf("%d prompt messages and %d chunks, want 1 and 6 (2 tokens each of 3 choices)", prompts, chunks)
	}
}

// The prompt's logprobs are bounded (one message carries them): a prompt
// whose positions times alternatives exceed it is refused before the
// engine, naming logprobs.prompt.
func TestPromptLogprobsBounded(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	e := &lpEngine{out: []uint32{0}}
	w := accepting("logprobs=20", "prompt_logprobs=20")
	w.MaxModelLen = 1 << 20
	s, c := serve(t, e, w, 0)
	s.Wrap(tokenized(textgen.HF(tok), 1<<20))
	s.Admit(true, "")
	req := prompt(make([]uint32, maxPromptLogprobs/4)...)
	req.Logprobs = &workerv1.Logprobs{Prompt: true, PromptTop: 4}
	_, err := all(t.Context(), c, req)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "logprobs.prompt: ") {
		t.Errorf("prompt of %d tokens with 4 alternatives: %v, want INVALID_ARGUMENT naming logprobs.prompt", maxPromptLogprobs/4, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last.Logprobs != nil {
		t.Errorf("the engine got the request %+v", e.last)
	}
}
