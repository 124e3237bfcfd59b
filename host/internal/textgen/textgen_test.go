package textgen

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// byteTokenizer encodes text as a BOS (1) then one token per byte, and
// decodes ids as bytes; it has no chat template.
type byteTokenizer struct{}

func (byteTokenizer) Encode(text string) ([]uint32, error) {
	ids := []uint32{1}
	for i := range len(text) {
		ids = append(ids, uint32(text[i]))
	}
	return ids, nil
}

func (byteTokenizer) ChatTokens(Chat) ([]uint32, string, error) {
	return nil, "", errors.New("no template")
}
func (byteTokenizer) Decode(ids []uint32) (string, error)   { return string(toBytes(ids)), nil }
func (byteTokenizer) HasChatTemplate() bool                 { return false }
func (byteTokenizer) NewDecoder([]uint32, []string) Decoder { return &bytes{} }
func (byteTokenizer) TemplateSource() string                { return "" }

func toBytes(ids []uint32) []byte {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return b
}

// bytes decodes ids as bytes, all held back until Flush, as a decoder
// that waits for more does.
type bytes struct{ held []byte }

func (d *bytes) Next(ids []uint32) string {
	for _, id := range ids {
		d.held = append(d.held, byte(id))
	}
	return ""
}

func (d *bytes) Flush() string { return string(d.held) }

// echo sends out as one chunk, and records the request and its aborts.
type echo struct {
	out     []uint32
	req     sdk.GenerateRequest
	aborted []string
}

func (e *echo) Generate(_ context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	e.req = req
	if err := send(sdk.Chunk{TokenIDs: e.out, Text: "ENGINE"}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: uint32(len(req.TokenIDs)), CompletionTokens: uint32(len(e.out))}, nil
}

func (e *echo) Abort(_ context.Context, ids []string) error { e.aborted = ids; return nil }

// A stop string found only in the text held back to the end still ends
// the request with FinishStop, and the text before it is sent; the engine
// gets token ids, no stop strings, and the rest of the context as
// max_tokens; a text prompt too long is refused before the engine.
func TestGenerateTailStopAndLimits(t *testing.T) {
	t.Parallel()
	e := &echo{out: []uint32{'a', 'b', 'S', 'c'}}
	g := New(e, byteTokenizer{}, 10)
	if !g.TakesText() || g.TakesChat() {
		t.Errorf("TakesText %v TakesChat %v, want text only (no template)", g.TakesText(), g.TakesChat())
	}
	var texts []string
	res, err := g.Generate(t.Context(), sdk.GenerateRequest{Text: "hi", Stop: []string{"S"}}, func(c sdk.Chunk) error {
		texts = append(texts, c.Text)
		return nil
	})
	if err != nil || res.FinishReason != sdk.FinishStop {
		t.Fatalf("result %+v, %v; want FinishStop", res, err)
	}
	if got := strings.Join(texts, ""); got != "ab" {
		t.Errorf("text %q, want %q (up to the stop string)", got, "ab")
	}
	if diff := cmp.Diff([]uint32{1, 'h', 'i'}, e.req.TokenIDs); diff != "" || e.req.Text != "" || e.req.Stop != nil || e.req.MaxTokens != 6 {
		t.Errorf("engine request %+v; want ids [1 h i], no text, no stop strings, max_tokens 6 (10-3-1); ids diff:\n%s", e.req, diff)
	}
	_, err = g.Generate(t.Context(), sdk.GenerateRequest{Text: strings.Repeat("x", 9)}, func(sdk.Chunk) error { return nil })
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "prompt.text: 10 tokens") {
		t.Errorf("long prompt: %v, want InvalidArgument naming prompt.text and its 10 tokens", err)
	}
	_, err = g.Generate(t.Context(), sdk.GenerateRequest{Text: "hi", MaxTokens: 20}, func(sdk.Chunk) error { return nil })
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "stopping.max_tokens: 20 plus the prompt's 3 tokens") {
		t.Errorf("max_tokens over the model: %v, want InvalidArgument naming stopping.max_tokens with the numbers", err)
	}
	if _, err := g.GenerateChat(t.Context(), nil, sdk.GenerateRequest{}, nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("chat without a template: %v, want InvalidArgument", err)
	}
	if err := g.Abort(t.Context(), []string{"r1"}); err != nil || !cmp.Equal(e.aborted, []string{"r1"}) {
		t.Errorf("Abort: %v, engine aborted %v; want r1 passed on", err, e.aborted)
	}
}

// seeded records the prompt its decoder was seeded with.
type seeded struct {
	byteTokenizer
	prompt *[]uint32
}

func (s seeded) NewDecoder(prompt []uint32, _ []string) Decoder { *s.prompt = prompt; return &bytes{} }

// The output's decoder is seeded with the prompt's ids as the engine got
// them, so output text is decoded in the prompt's context.
func TestDecoderSeededWithPrompt(t *testing.T) {
	t.Parallel()
	var prompt []uint32
	g := New(&echo{out: []uint32{'x'}}, seeded{prompt: &prompt}, 0)
	if _, err := g.Generate(t.Context(), sdk.GenerateRequest{Text: "hi"}, func(sdk.Chunk) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint32{1, 'h', 'i'}, prompt); diff != "" {
		t.Errorf("decoder seeded with %v, want the prompt's ids [1 h i]:\n%s", prompt, diff)
	}
}

// eachByte is byteTokenizer with a decoder that emits each token's byte
// at once.
type eachByte struct{ byteTokenizer }

func (eachByte) NewDecoder([]uint32, []string) Decoder { return eachByteDecoder{} }

type eachByteDecoder struct{}

func (eachByteDecoder) Next(ids []uint32) string { return string(toBytes(ids)) }
func (eachByteDecoder) Flush() string            { return "" }

// lastPrompt sends its output a token a chunk, then the prompt's logprobs
// alone, as SGLang and TensorRT-LLM give them with their last output.
type lastPrompt struct {
	echo
	chunks int // chunks the engine got to send
}

func (e *lastPrompt) Generate(_ context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	for _, id := range e.out {
		e.chunks++
		if err := send(sdk.Chunk{TokenIDs: []uint32{id}, Logprobs: []sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: id}}}}); err != nil {
			return sdk.Result{}, err
		}
	}
	e.chunks++
	if err := send(sdk.Chunk{PromptLogprobs: []sdk.TokenLogprob{{Chosen: sdk.Logprob{TokenID: 1, Unknown: true}}}}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishLength}, nil
}

// A stop string does not end the engine's stream before the prompt's
// logprobs come, when they are asked for: the output after the stop
// string is dropped, and the prompt's logprobs reach the client.
func TestStopStringAwaitsPromptLogprobs(t *testing.T) {
	t.Parallel()
	for _, prompt := range []bool{false, true} {
		e := &lastPrompt{echo: echo{out: []uint32{'a', 'S', 'b', 'c'}}}
		g := New(e, eachByte{}, 0)
		var text strings.Builder
		var got []sdk.TokenLogprob
		req := sdk.GenerateRequest{Text: "hi", Stop: []string{"S"}, Logprobs: &sdk.Logprobs{Output: true, Prompt: prompt}}
		res, err := g.Generate(t.Context(), req, func(c sdk.Chunk) error {
			text.WriteString(c.Text)
			if c.PromptLogprobs != nil {
				got = c.PromptLogprobs
			}
			return nil
		})
		if err != nil || res.FinishReason != sdk.FinishStop || text.String() != "a" {
			t.Errorf("prompt logprobs %v: %+v, %v, text %q; want FinishStop and %q", prompt, res, err, text.String(), "a")
		}
		switch {
		case prompt && (len(got) != 1 || e.chunks != 5):
			t.Errorf("prompt logprobs asked: got %v after %d engine chunks; want them, after all 5", got, e.chunks)
		case !prompt && e.chunks != 2:
			t.Errorf("no prompt logprobs asked: the engine sent %d chunks; want its stream ended at the stop string (2)", e.chunks)
		}
	}
}
