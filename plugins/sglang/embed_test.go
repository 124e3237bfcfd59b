package sglang_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigilhq/vigil/plugins/sglang"
	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// TestEmbed: on an embedding model (is_generation false), in either
// layout, the worker accepts embed alone, token ids go to Embed and text
// to TextEmbed, and the vectors and counts are the engine's.
func TestEmbed(t *testing.T) {
	t.Parallel()
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, mock.Config{Layout: layout, EmbeddingDim: 8, ContextLength: 16})
			a := sglang.New()
			w := sdktest.Start(t, a, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
			if w.Accepts != sdk.CapEmbed {
				t.Errorf("Worker.Accepts = %q, want %q (an embedding model takes no generation request)", w.Accepts, sdk.CapEmbed)
			}
			info, err := a.Info(t.Context())
			if err != nil || !info.Capabilities.Embed {
				t.Fatalf("Info() = %+v, %v; want Capabilities.Embed", info, err)
			}
			ids := []uint32{128000, 9906, 1917}
			res, err := a.Embed(t.Context(), sdk.EmbedRequest{RequestID: "r1", TokenIDs: ids})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sdk.EmbedResult{Embedding: mock.Embedding(ids, 8), PromptTokens: 3}, res); diff != "" {
				t.Errorf("Embed(token ids) (-want +got):\n%s", diff)
			}
			res, err = a.Embed(t.Context(), sdk.EmbedRequest{RequestID: "r2", Text: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sdk.EmbedResult{Embedding: mock.Embedding([]uint32{'h', 'i'}, 8), PromptTokens: 2}, res); diff != "" {
				t.Errorf("Embed(text) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmbedRefusals: what SGLang's embedding cannot do is refused with a
// class the host maps, naming the field.
func TestEmbedRefusals(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{EmbeddingDim: 4, ContextLength: 4})
	a := started(t, addr, nil)
	_, err := a.Embed(t.Context(), sdk.EmbedRequest{RequestID: "d", TokenIDs: []uint32{1}, Dimensions: 2})
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("Embed(dimensions 2) = %v, want an invalid argument naming dimensions", err)
	}
	_, err = a.Embed(t.Context(), sdk.EmbedRequest{RequestID: "l", TokenIDs: []uint32{1, 2, 3, 4}})
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "context length") {
		t.Errorf("Embed(4 ids, context 4) = %v, want the engine's invalid argument on the context length", err)
	}
	_, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g", TokenIDs: []uint32{1}}, func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Generate on an embedding model = %v, want the engine's invalid argument", err)
	}
}

// TestEmbedGenerationModel: a generation model does not list embed, and
// its engine's refusal of Embed keeps the invalid-argument class.
func TestEmbedGenerationModel(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{})
	a := sglang.New()
	w := sdktest.Start(t, a, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	if strings.Contains(w.Accepts, sdk.CapEmbed) {
		t.Errorf("Worker.Accepts = %q on a generation model, want no %s", w.Accepts, sdk.CapEmbed)
	}
	if _, err := a.Embed(t.Context(), sdk.EmbedRequest{RequestID: "e", Text: "hi"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Embed on a generation model = %v, want an invalid argument", err)
	}
}
