package textgen

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/sdk"
)

// script is an engine whose output is out, one token a chunk, going on
// from the output its prompt already holds (the prompt is prompt ids
// long); it fails, the engine lost, before the output's token failAt (-1:
// never).
type script struct {
	prompt, failAt int
	out            []uint32
	req            sdk.GenerateRequest
}

func (s *script) Generate(_ context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	s.req = req
	start := len(req.TokenIDs) - s.prompt
	for i := start; i < len(s.out); i++ {
		if i == s.failAt {
			return sdk.Result{}, sdk.ErrUnavailable
		}
		c := sdk.Chunk{TokenIDs: s.out[i : i+1]}
		if req.Logprobs != nil {
			// The position's logprob says which it is.
			c.Logprobs = []sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: uint32(i)}}}
		}
		if err := send(c); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: uint32(len(req.TokenIDs)), CompletionTokens: uint32(len(s.out) - start)}, nil
}

func (s *script) Abort(context.Context, []string) error { return nil }

// collect runs gen, returning the text it sent and its result; positions
// gets the positions whose logprobs it sent.
func collect(positions *[]uint32, gen func(send func(sdk.Chunk) error) (sdk.Result, error)) (string, sdk.Result, error) {
	var text strings.Builder
	res, err := gen(func(c sdk.Chunk) error {
		text.WriteString(c.Text)
		for _, lp := range c.Logprobs {
			*positions = append(*positions, lp.Chosen.TokenID)
		}
		return nil
	})
	return text.String(), res, err
}

// A stream cut after any of its tokens and resumed from the ids and held
// text the first worker gives is the stream that was not cut: the same
// text, the same finish and usage. The output holds a stop string's
// possible starts (held across the cut), characters cut across tokens,
// and the stop string itself.
func TestResumeContinuesExactly(t *testing.T) {
	t.Parallel()
	e, _ := llama3(t)
	prompt, err := e.tok.Encode("Say it:")
	if err != nil {
		t.Fatal(err)
	}
	stops := []string{"##END"}
	for _, out := range []string{"a # b ## c 𝒳 ok ##EN ##END after", "日本語 🙂 𝒳𝒴 plain words here"} {
		outIDs, err := e.tok.(interface {
			EncodeRaw(string) ([]uint32, error)
		}).EncodeRaw(out)
		if err != nil {
			t.Fatal(err)
		}
		run := func(eng *script, gen func(*Engine, func(sdk.Chunk) error) (sdk.Result, error)) (string, sdk.Result, error) {
			w := New(eng, e.tok, 8192)
			var positions []uint32
			return collect(&positions, func(send func(sdk.Chunk) error) (sdk.Result, error) { return gen(w, send) })
		}
		req := sdk.GenerateRequest{TokenIDs: prompt, Stop: stops, MaxTokens: 200}
		want, wantRes, err := run(&script{prompt: len(prompt), failAt: -1, out: outIDs}, func(w *Engine, send func(sdk.Chunk) error) (sdk.Result, error) {
			return w.GenerateFrom(t.Context(), req, "prompt.token_ids", send)
		})
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k < len(outIDs); k++ {
			first, _, err := run(&script{prompt: len(prompt), failAt: k, out: outIDs}, func(w *Engine, send func(sdk.Chunk) error) (sdk.Result, error) {
				return w.GenerateFrom(t.Context(), req, "prompt.token_ids", send)
			})
			if !errors.Is(err, sdk.ErrUnavailable) {
				if err == nil && k >= int(wantRes.CompletionTokens) {
					break // the stop string ended it before the cut
				}
				t.Fatalf("%q cut at %d: err %v, want ErrUnavailable", out, k, err)
			}
			held := heldText(err)
			if got := e.ResumedText(prompt, outIDs[:k], held, false); got != first {
				t.Errorf("%q cut at %d: ResumedText %q, want the text sent %q", out, k, got, first)
			}
			eng := &script{prompt: len(prompt), failAt: -1, out: outIDs}
			rest, res, err := run(eng, func(w *Engine, send func(sdk.Chunk) error) (sdk.Result, error) {
				return w.GenerateResumed(t.Context(), req, outIDs[:k], held, false, send)
			})
			if err != nil {
				t.Fatalf("%q cut at %d: resumed: %v", out, k, err)
			}
			if first+rest != want {
				t.Errorf("%q cut at %d (held %q): %q + %q, want %q", out, k, held, first, rest, want)
			}
			if res.FinishReason != wantRes.FinishReason || res.CompletionTokens != wantRes.CompletionTokens || res.PromptTokens != uint32(len(prompt)) {
				t.Errorf("%q cut at %d: result %+v, want %+v with %d prompt tokens", out, k, res, wantRes, len(prompt))
			}
			if eng.req.MaxTokens != req.MaxTokens-uint32(k) || len(eng.req.TokenIDs) != len(prompt)+k {
				t.Errorf("%q cut at %d: engine got max_tokens %d and %d prompt ids, want %d and %d", out, k, eng.req.MaxTokens, len(eng.req.TokenIDs), req.MaxTokens-uint32(k), len(prompt)+k)
			}
		}
	}
}

// heldText is what the endpoint reads of an engine's error.
func heldText(err error) string {
	var h interface{ HeldText() string }
	if errors.As(err, &h) {
		return h.HeldText()
	}
	return ""
}

// Nothing is left to generate when the output already reaches
// max_tokens: the resume is refused, naming the field.
func TestResumeAtMaxTokens(t *testing.T) {
	t.Parallel()
	w := New(&script{failAt: -1}, byteTokenizer{}, 0)
	_, err := w.GenerateResumed(t.Context(), sdk.GenerateRequest{TokenIDs: []uint32{'a'}, MaxTokens: 2}, []uint32{'b', 'c'}, "", false, func(sdk.Chunk) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "resume.output_token_ids: 2 ids reach stopping.max_tokens 2") {
		t.Fatalf("GenerateResumed() = %v, want the refusal naming resume.output_token_ids", err)
	}
}

// With logprobs, a resumed stream sends those of its own tokens as the
// stream that was not cut sends them: none of a token the stop string cut,
// though the other worker's held text is emitted ahead of the new text.
func TestResumeLogprobs(t *testing.T) {
	t.Parallel()
	e, _ := llama3(t)
	prompt, _ := e.tok.Encode("Say it:")
	out, err := e.tok.(interface {
		EncodeRaw(string) ([]uint32, error)
	}).EncodeRaw("a ## b ##E ##END after")
	if err != nil {
		t.Fatal(err)
	}
	req := sdk.GenerateRequest{TokenIDs: prompt, Stop: []string{"##END"}, MaxTokens: 200, Logprobs: &sdk.Logprobs{Output: true}}
	var whole []uint32
	if _, _, err := collect(&whole, func(send func(sdk.Chunk) error) (sdk.Result, error) {
		return New(&script{prompt: len(prompt), failAt: -1, out: out}, e.tok, 8192).GenerateFrom(t.Context(), req, "prompt.token_ids", send)
	}); err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(out); k++ {
		var first, rest []uint32
		_, _, err := collect(&first, func(send func(sdk.Chunk) error) (sdk.Result, error) {
			return New(&script{prompt: len(prompt), failAt: k, out: out}, e.tok, 8192).GenerateFrom(t.Context(), req, "prompt.token_ids", send)
		})
		if err == nil {
			break // the stop string ended it before the cut
		}
		if _, _, err := collect(&rest, func(send func(sdk.Chunk) error) (sdk.Result, error) {
			return New(&script{prompt: len(prompt), failAt: -1, out: out}, e.tok, 8192).GenerateResumed(t.Context(), req, out[:k], heldText(err), false, send)
		}); err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(slices.Clone(whole), func(p uint32) bool { return p < uint32(k) })
		if !slices.Equal(rest, want) {
			t.Errorf("cut at %d (held %q): resumed logprobs of positions %v, want %v (the uncut stream's %v from %d)", k, heldText(err), rest, want, whole, k)
		}
	}
}
