package sdk

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// stubEmbedder is a stubEngine that serves embeddings through embed.
type stubEmbedder struct {
	stubEngine
	embed func(context.Context, EmbedRequest) (EmbedResult, error)
}

func (s *stubEmbedder) Embed(ctx context.Context, req EmbedRequest) (EmbedResult, error) {
	return s.embed(ctx, req)
}

func embedInfo(embed bool) func(context.Context) (AdapterInfo, error) {
	return func(context.Context) (AdapterInfo, error) {
		return AdapterInfo{Name: "e", Capabilities: Capabilities{Embed: embed}}, nil
	}
}

// TestPluginEmbed: an embedding request and its vector cross the plugin
// boundary as they were, text or token ids, and the adapter's refusal
// keeps its class and field.
func TestPluginEmbed(t *testing.T) {
	t.Parallel()
	var got []EmbedRequest
	impl := &stubEmbedder{stubEngine: stubEngine{info: embedInfo(true)}, embed: func(_ context.Context, req EmbedRequest) (EmbedResult, error) {
		got = append(got, req)
		if req.Dimensions > 0 {
			return EmbedResult{}, &FieldError{Field: "dimensions", Problem: "this engine cannot truncate embeddings"}
		}
		return EmbedResult{Embedding: []float32{0.6, -0.8}, PromptTokens: 3}, nil
	}}
	e := TestPluginEngine(t, impl)
	info, err := e.Info(t.Context())
	if err != nil || !info.Capabilities.Embed {
		t.Fatalf("Info() = %+v, %v; want Capabilities.Embed", info, err)
	}
	emb := e.(Embedder)
	for _, req := range []EmbedRequest{{RequestID: "a", Text: "hi"}, {RequestID: "b", TokenIDs: []uint32{1, 2, 3}}, {RequestID: "c", TokenIDs: []uint32{}}} {
		res, err := emb.Embed(t.Context(), req)
		if err != nil || !reflect.DeepEqual(res, EmbedResult{Embedding: []float32{0.6, -0.8}, PromptTokens: 3}) {
			t.Fatalf("Embed(%+v) = %+v, %v", req, res, err)
		}
	}
	want := []EmbedRequest{{RequestID: "a", Text: "hi"}, {RequestID: "b", TokenIDs: []uint32{1, 2, 3}}, {RequestID: "c", TokenIDs: []uint32{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the adapter got %+v, want %+v", got, want)
	}
	_, err = emb.Embed(t.Context(), EmbedRequest{RequestID: "d", Text: "hi", Dimensions: 8})
	var fe *FieldError
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "dimensions" {
		t.Errorf("Embed(dimensions 8) = %v, want an invalid argument naming dimensions", err)
	}
}

// TestPluginEmbedNotClaimed: the host never calls Embed on an adapter
// whose Info does not claim it, as one built before Embed.
func TestPluginEmbedNotClaimed(t *testing.T) {
	t.Parallel()
	called := false
	impl := &stubEmbedder{stubEngine: stubEngine{info: embedInfo(false)}, embed: func(context.Context, EmbedRequest) (EmbedResult, error) {
		called = true
		return EmbedResult{}, nil
	}}
	e := TestPluginEngine(t, impl)
	if _, err := e.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.(Embedder).Embed(t.Context(), EmbedRequest{Text: "hi"}); !errors.Is(err, ErrUnimplemented) || called {
		t.Errorf("Embed() = %v (adapter called: %v), want ErrUnimplemented without a call", err, called)
	}
}

// TestCheckCapabilitiesEmbed: an adapter that claims Embed without
// implementing Embedder is refused at Info, naming it.
func TestCheckCapabilitiesEmbed(t *testing.T) {
	t.Parallel()
	err := CheckCapabilities(&stubEngine{}, Capabilities{Embed: true})
	if !errors.Is(err, ErrUnimplemented) || !strings.Contains(err.Error(), "claims Embed but does not implement sdk.Embedder") {
		t.Errorf("CheckCapabilities(no Embedder, Embed) = %v", err)
	}
	if err := CheckCapabilities(&stubEmbedder{}, Capabilities{Embed: true}); err != nil {
		t.Errorf("CheckCapabilities(Embedder, Embed) = %v, want nil", err)
	}
	e := TestPluginEngine(t, &stubEngine{info: embedInfo(true)})
	if _, err := e.Info(t.Context()); !errors.Is(err, ErrUnimplemented) {
		t.Errorf("Info() of an adapter claiming Embed without Embedder = %v, want ErrUnimplemented", err)
	}
}
