package router

import (
	"context"
	"fmt"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errNoEmbeddings answers an embedding request for a model none of whose
// workers serves an embedding model: INVALID_ARGUMENT naming the model.
func errNoEmbeddings(model string) error {
	return status.Errorf(codes.InvalidArgument, "model: %s does not serve embeddings: its workers' engines serve a generation model, "+
		"not an embedding model (none lists the capability embed); send it to /v1/chat/completions or /v1/completions", modelNamed(model))
}

// errEmbeddingOnly answers a generation request for a model whose workers
// all serve an embedding model, as vLLM answers chat against a pooling
// model: INVALID_ARGUMENT naming the model.
func errEmbeddingOnly(model string) error {
	return status.Errorf(codes.InvalidArgument, "model: %s is an embedding model: it does not generate (Chat Completions, "+
		"Completions, Responses); its workers serve POST /v1/embeddings only", modelNamed(model))
}

func modelNamed(model string) string {
	if model == "" {
		return "the router's model"
	}
	return fmt.Sprintf("model %q", model)
}

// Embed relays an Embed to a worker of req.Model that serves an embedding
// model (it lists the embed capability), with the retries of Generate;
// without one, it is INVALID_ARGUMENT naming the model. A worker that
// answers UNIMPLEMENTED (one that serves no embeddings after all) is
// answered as none.
func (p *Proxy) Embed(ctx context.Context, req *workerv1.EmbedRequest) (*workerv1.EmbedResponse, error) {
	var resp *workerv1.EmbedResponse
	err := p.unary(ctx, Ask{Model: req.GetModel(), Kind: KindEmbed}, req, func(ctx context.Context, c workerv1.WorkerClient) (err error) {
		resp, err = c.Embed(ctx, req)
		return err
	})
	if status.Code(err) == codes.Unimplemented {
		p.log.Warn("a worker listing the embed capability answered Embed UNIMPLEMENTED", "model", req.GetModel(), "error", status.Convert(err).Message())
		err = errNoEmbeddings(req.GetModel())
	}
	_, err = cleanStatus(err)
	return resp, err
}
