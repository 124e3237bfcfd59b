package endpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeEmbedder is a fakeEngine whose adapter serves embeddings: each
// vector is the input's length and its text's length, and it records
// every request.
type fakeEmbedder struct {
	fakeEngine
	mu   sync.Mutex
	reqs []sdk.EmbedRequest
	err  error
}

func (f *fakeEmbedder) Embed(_ context.Context, req sdk.EmbedRequest) (sdk.EmbedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.err != nil {
		return sdk.EmbedResult{}, f.err
	}
	return sdk.EmbedResult{Embedding: []float32{float32(len(req.TokenIDs)), float32(len(req.Text))}, PromptTokens: uint32(len(req.TokenIDs))}, nil
}

func (f *fakeEmbedder) last() sdk.EmbedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

// embedWorker is a worker of an embedding model, as the SGLang adapter
// reports one.
var embedWorker = sdk.Worker{ServedModelName: "e5", MaxModelLen: 8, Accepts: sdk.CapEmbed}

func embedText(s string) *workerv1.EmbedRequest {
	return &workerv1.EmbedRequest{RequestId: "e", Input: &workerv1.EmbedRequest_Text{Text: s}}
}

func embedIDs(ids ...uint32) *workerv1.EmbedRequest {
	return &workerv1.EmbedRequest{RequestId: "e", Input: &workerv1.EmbedRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: ids}}}
}

// TestEmbedCapabilities: a worker publishes embed only when its model is
// an embedding model and its adapter serves Embed, and then nothing of
// generation; a generation model's worker never publishes it.
// (TestEmbed checks the set with a tokenizer: embed,tokenize.)
func TestEmbedCapabilities(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		engine sdk.Generator
		w      sdk.Worker
		want   string
	}{
		{"embedding model", &fakeEmbedder{}, embedWorker, "embed"},
		{"adapter without Embed", &fakeEngine{}, embedWorker, "none"},
		{"generation model", &fakeEmbedder{}, accepting(sglangAccepts...), "choice,frequency_penalty,grammar.ebnf,ignore_eos,json_object,json_schema,min_p,min_tokens," +
			"n=128,presence_penalty,regex,repetition_penalty,structural_tag,top_k"},
	} {
		s, _ := serve(t, c.engine, c.w, 0)
		if got := s.Capabilities().String(); got != c.want {
			t.Errorf("%s: capabilities %q, want %q", c.name, got, c.want)
		}
	}
}

// TestEmbed: token ids go to the engine as they are; text is tokenized
// with the worker's tokenizer (special tokens added) when it has one, else
// sent as text; the vector and the count come back.
func TestEmbed(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	e := &fakeEmbedder{}
	s, c := serve(t, e, embedWorker, 0)
	s.Admit(true, "")
	resp, err := c.Embed(t.Context(), embedIDs(5, 6, 7))
	if err != nil || !cmp.Equal(resp.GetEmbedding(), []float32{3, 0}) || resp.GetPromptTokens() != 3 {
		t.Fatalf("Embed(3 ids) = %v, %v; want [3 0] and 3 tokens", resp, err)
	}
	if got := e.last(); !cmp.Equal(got.TokenIDs, []uint32{5, 6, 7}) || !strings.HasPrefix(got.RequestID, "e-") {
		t.Errorf("engine request %+v, want ids 5 6 7 and an engine id from e", got)
	}
	if _, err := c.Embed(t.Context(), embedText("hello")); err != nil || e.last().Text != "hello" || e.last().TokenIDs != nil {
		t.Errorf("Embed(text) without a tokenizer = %v, engine request %+v; want the text sent as it is", err, e.last())
	}

	s.Wrap(tokenized(textgen.HF(tok), 8192))
	if got := s.Capabilities().String(); got != "embed,tokenize" {
		t.Errorf("capabilities with a tokenizer %q, want embed,tokenize", got)
	}
	resp, err = c.Embed(t.Context(), embedText("Hello world"))
	want, _ := tok.Encode("Hello world", true)
	if err != nil || !cmp.Equal(e.last().TokenIDs, want) || e.last().Text != "" || resp.GetPromptTokens() != uint32(len(want)) {
		t.Errorf("Embed(text) with a tokenizer = %v, %v; engine request %+v, want ids %v", resp, err, e.last(), want)
	}
	// With a tokenizer, ids outside its vocabulary are refused, as
	// Detokenize refuses them, before the engine.
	before := len(e.reqs)
	_, err = c.Embed(t.Context(), embedIDs(5, 999_999_999))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "input.token_ids: ") || len(e.reqs) != before {
		t.Errorf("Embed(an id outside the vocabulary) = %v, engine requests %d -> %d; want INVALID_ARGUMENT naming input.token_ids, none sent", err, before, len(e.reqs))
	}
}

// TestEmbedRefusals: what the worker refuses before the engine, each
// naming the field or the model.
func TestEmbedRefusals(t *testing.T) {
	t.Parallel()
	e := &fakeEmbedder{}
	s, c := serve(t, e, embedWorker, 0)
	if _, err := c.Embed(t.Context(), embedIDs(1)); status.Code(err) != codes.Unavailable {
		t.Errorf("Embed before Admit = %v, want UNAVAILABLE", err)
	}
	s.Admit(true, "")
	other := embedIDs(1)
	other.Model = "llama"
	for _, c2 := range []struct {
		name string
		req  *workerv1.EmbedRequest
		code codes.Code
		msg  string
	}{
		{"empty text", embedText(""), codes.InvalidArgument, "input: must not be empty"},
		{"empty ids", embedIDs(), codes.InvalidArgument, "input.token_ids: must not be empty"},
		{"too long", embedIDs(1, 2, 3, 4, 5, 6, 7, 8), codes.InvalidArgument, "input.token_ids: 8 tokens, but the model's maximum length is 8"},
		{"another model", other, codes.NotFound, `model "llama": this worker serves "e5"`},
	} {
		_, err := c.Embed(t.Context(), c2.req)
		if st := status.Convert(err); st.Code() != c2.code || !strings.HasPrefix(st.Message(), c2.msg) {
			t.Errorf("%s: %v, want %s %q", c2.name, err, c2.code, c2.msg)
		}
	}
	if n := len(e.reqs); n != 0 {
		t.Errorf("the engine got %d requests, want none", n)
	}
}

// TestEmbedWrongKind: a generation model's worker answers Embed
// UNIMPLEMENTED naming the model, as an older worker would; an embedding
// model's answers Generate INVALID_ARGUMENT naming it, never reaching the
// engine.
func TestEmbedWrongKind(t *testing.T) {
	t.Parallel()
	gs, gc := serve(t, &fakeEmbedder{}, worker, 0)
	gs.Admit(true, "")
	_, err := gc.Embed(t.Context(), embedIDs(1))
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), `model "m" does not serve embeddings`) {
		t.Errorf("Embed on a generation model = %v, want UNIMPLEMENTED naming the model", err)
	}
	e := &fakeEmbedder{}
	es, ec := serve(t, e, embedWorker, 0)
	es.Admit(true, "")
	r := run(t.Context(), ec, prompt(1, 2))
	if st := status.Convert(r.err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `model "e5" is an embedding model`) {
		t.Errorf("Generate on an embedding model = %v, want INVALID_ARGUMENT naming the model", r.err)
	}
	if len(e.ids) != 0 {
		t.Errorf("the engine generated for %v, want nothing", e.ids)
	}
}

// TestEmbedEngineErrors: the engine's refusals keep their class; a
// failure of no class reaches the client without the engine's or the
// transport's text, and UNIMPLEMENTED (TensorRT-LLM's Embed) says the
// model serves no embeddings.
func TestEmbedEngineErrors(t *testing.T) {
	t.Parallel()
	for _, c2 := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"invalid", fmt.Errorf("%w: dimensions: cannot truncate", sdk.ErrInvalidArgument), codes.InvalidArgument, "invalid argument: dimensions: cannot truncate"},
		{"unavailable", fmt.Errorf("%w: SGLang: paused", sdk.ErrUnavailable), codes.Unavailable, "engine unavailable"},
		{"unimplemented", fmt.Errorf("%w: Embed RPC not yet implemented", sdk.ErrUnimplemented), codes.Unimplemented, `model "e5" does not serve embeddings`},
		{"no class", errors.New("SGLang request failed: Internal: transport: connection reset by peer"), codes.Unavailable, "engine embedding request failed"},
	} {
		s, c := serve(t, &fakeEmbedder{err: c2.err}, embedWorker, 0)
		s.Admit(true, "")
		_, err := c.Embed(t.Context(), embedIDs(1))
		st := status.Convert(err)
		if st.Code() != c2.code || !strings.Contains(st.Message(), c2.msg) {
			t.Errorf("%s: %v, want %s %q", c2.name, err, c2.code, c2.msg)
		}
		if c2.name == "no class" && strings.Contains(st.Message(), "transport") {
			t.Errorf("%s: %q leaks the engine's transport text", c2.name, st.Message())
		}
	}
}
