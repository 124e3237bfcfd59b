package mock

import (
	"context"
	"math"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
)

// errNotGeneration answers Generate on an embedding model. The words are
// the mock's; SGLang refuses generation on a model loaded with
// --is-embedding.
var errNotGeneration = status.Error(codes.InvalidArgument, "this model is an embedding model (is_generation false): it does not generate")

// errNotEmbedding answers Embed and TextEmbed on a generation model.
var errNotEmbedding = status.Error(codes.InvalidArgument, "this model is a generation model (is_generation true): it does not embed")

// Embedding is the mock's embedding of input: dim values, each a sum of
// one pseudo-random number in [-1, 1) per input element and position,
// then scaled to length 1 (as embedding models normalize). Embed's input
// is the token ids; TextEmbed's the text's UTF-8 bytes, one "token" each.
// An empty input is refused before it gets here.
func Embedding(input []uint32, dim int) []float32 {
	v := make([]float64, dim)
	for i, id := range input {
		for j := range v {
			x := splitmix(uint64(id)<<32 ^ uint64(i)<<16 ^ uint64(j))
			v[j] += float64(x>>11)/(1<<52) - 1
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dim)
	for j, x := range v {
		if norm > 0 {
			out[j] = float32(x / norm)
		}
	}
	return out
}

// splitmix is SplitMix64's finalizer: a well-mixed 64-bit hash.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// embed answers one embedding request of input: refused on a generation
// model, when empty, or when the context cannot hold it.
func (e *Engine) embed(ctx context.Context, input []uint32) ([]float32, map[string]string, error) {
	if err := e.Available(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, status.FromContextError(err).Err()
	}
	if e.cfg.EmbeddingDim == 0 {
		return nil, nil, errNotEmbedding
	}
	if len(input) == 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "the input is empty")
	}
	if err := e.checkLength(len(input), nil); err != nil {
		return nil, nil, err
	}
	return Embedding(input, e.cfg.EmbeddingDim), map[string]string{"prompt_tokens": strconv.Itoa(len(input))}, nil
}

// Embed embeds token ids.
func (s *server) Embed(ctx context.Context, req *sglangpb.EmbedRequest) (*sglangpb.EmbedResponse, error) {
	s.e.RecordRequest(req)
	ids, err := uint32s("input_ids", req.GetInputIds())
	if err != nil {
		return nil, err
	}
	v, meta, err := s.e.embed(ctx, ids)
	if err != nil {
		return nil, err
	}
	return &sglangpb.EmbedResponse{Embedding: v, MetaInfo: meta}, nil
}

// TextEmbed embeds text, its bytes standing for its tokens.
func (s *server) TextEmbed(ctx context.Context, req *sglangpb.TextEmbedRequest) (*sglangpb.TextEmbedResponse, error) {
	s.e.RecordRequest(req)
	text := []byte(req.GetText())
	input := make([]uint32, len(text))
	for i, b := range text {
		input[i] = uint32(b)
	}
	v, meta, err := s.e.embed(ctx, input)
	if err != nil {
		return nil, err
	}
	return &sglangpb.TextEmbedResponse{Embedding: v, MetaInfo: meta}, nil
}
