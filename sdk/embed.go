package sdk

import (
	"context"
	"fmt"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
)

// Embedder is the optional embedding side of an adapter, for adapters
// that set Capabilities.Embed and whose engine serves an embedding model:
// the adapter then lists "embed" in Worker.Accepts. Embed is called only
// after a successful Start, concurrently with itself and with Generator's
// methods.
type Embedder interface {
	// Embed returns the embedding of req's one input. Its errors are
	// Generate's before the first chunk: wrap ErrUnavailable when the
	// engine cannot take the request, ErrInvalidArgument (naming the
	// field) when it rejects it, such as Dimensions on an engine that
	// cannot truncate, or a text input to one that takes token ids only.
	// An engine that answers UNIMPLEMENTED (TensorRT-LLM's) is
	// ErrUnimplemented. When ctx ends, Embed returns ctx's error promptly.
	Embed(ctx context.Context, req EmbedRequest) (EmbedResult, error)
}

// EmbedRequest is one embedding request as the engine should see it.
type EmbedRequest struct {
	// RequestID is the engine-side id, unique per request.
	RequestID string
	// Text or TokenIDs is the input; exactly one is set. The host sends
	// token ids when it has the model's tokenizer, else text.
	Text     string
	TokenIDs []uint32
	// Dimensions asks for the embedding truncated to this many
	// dimensions (OpenAI's dimensions); 0 means the model's own.
	Dimensions uint32
}

// EmbedResult is the embedding of one input.
type EmbedResult struct {
	// Embedding is the vector, as the engine computed it.
	Embedding []float32
	// PromptTokens counts the input's tokens, as the engine reports.
	PromptTokens uint32
}

// CapEmbed is the Worker.Accepts item of an engine that serves an
// embedding model: the host calls Embed only on a worker that lists it
// and whose adapter has Capabilities.Embed, and sends it no generation
// request.
const CapEmbed = "embed"

// checkEmbedder is CheckCapabilities' part for Embed.
func checkEmbedder(e Engine, c Capabilities) error {
	if _, ok := e.(Embedder); ok || !c.Embed {
		return nil
	}
	return fmt.Errorf("%w: the adapter claims Embed but does not implement sdk.Embedder", ErrUnimplemented)
}

func (s *engineServer) Embed(ctx context.Context, req *pluginv1.EmbedRequest) (*pluginv1.EmbedResponse, error) {
	e, ok := s.impl.(Embedder)
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: the adapter does not serve embeddings", ErrUnimplemented))
	}
	res, err := e.Embed(ctx, embedRequestFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginv1.EmbedResponse{Embedding: res.Embedding, PromptTokens: res.PromptTokens}, nil
}

// Embed asks the adapter for an embedding. An adapter whose Info did not
// claim Capabilities.Embed is not called: ErrUnimplemented.
func (c *engineClient) Embed(ctx context.Context, req EmbedRequest) (EmbedResult, error) {
	if !c.embed.Load() {
		return EmbedResult{}, fmt.Errorf("%w: the adapter does not serve embeddings (Capabilities.Embed)", ErrUnimplemented)
	}
	resp, err := c.client.Embed(ctx, embedRequestToProto(req))
	if err != nil {
		return EmbedResult{}, c.ctxErr(ctx, err)
	}
	return EmbedResult{Embedding: resp.GetEmbedding(), PromptTokens: resp.GetPromptTokens()}, nil
}

func embedRequestToProto(r EmbedRequest) *pluginv1.EmbedRequest {
	p := &pluginv1.EmbedRequest{RequestId: r.RequestID, Dimensions: r.Dimensions}
	if r.TokenIDs != nil {
		p.Input = &pluginv1.EmbedRequest_TokenIds{TokenIds: &pluginv1.TokenIds{Ids: r.TokenIDs}}
	} else {
		p.Input = &pluginv1.EmbedRequest_Text{Text: r.Text}
	}
	return p
}

func embedRequestFromProto(p *pluginv1.EmbedRequest) EmbedRequest {
	r := EmbedRequest{RequestID: p.GetRequestId(), Text: p.GetText(), Dimensions: p.GetDimensions()}
	if ids := p.GetTokenIds(); ids != nil {
		r.TokenIDs = ids.GetIds()
		if r.TokenIDs == nil {
			r.TokenIDs = []uint32{}
		}
	}
	return r
}
