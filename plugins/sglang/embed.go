package sglang

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

var _ sdk.Embedder = (*Adapter)(nil)

// Embed maps req onto SglangService/Embed (token ids) or TextEmbed (text,
// which the server tokenizes), the same in both layouts. SGLang's gRPC
// embedding takes no dimensions: a request for them is refused, naming
// dimensions. prompt_tokens comes from meta_info, else the ids' count.
func (a *Adapter) Embed(ctx context.Context, req sdk.EmbedRequest) (sdk.EmbedResult, error) {
	if req.Dimensions != 0 {
		return sdk.EmbedResult{}, fmt.Errorf("%w: dimensions: SGLang's gRPC Embed cannot truncate embeddings; leave dimensions unset", sdk.ErrInvalidArgument)
	}
	client, err := a.client()
	if err != nil {
		return sdk.EmbedResult{}, err
	}
	rid := req.RequestID
	var (
		embedding []float32
		meta      map[string]string
	)
	if req.TokenIDs != nil {
		ids := make([]int32, len(req.TokenIDs))
		for i, id := range req.TokenIDs {
			if id > math.MaxInt32 {
				return sdk.EmbedResult{}, fmt.Errorf("%w: token_ids[%d]: %d is above SGLang's int32 ids", sdk.ErrInvalidArgument, i, id)
			}
			ids[i] = int32(id)
		}
		var resp *sglangpb.EmbedResponse
		resp, err = client.Embed(ctx, &sglangpb.EmbedRequest{InputIds: ids, Rid: &rid})
		embedding, meta = resp.GetEmbedding(), resp.GetMetaInfo()
	} else {
		var resp *sglangpb.TextEmbedResponse
		resp, err = client.TextEmbed(ctx, &sglangpb.TextEmbedRequest{Text: req.Text, Rid: &rid})
		embedding, meta = resp.GetEmbedding(), resp.GetMetaInfo()
	}
	if err != nil {
		if cerr := sdk.ContextErr(ctx); cerr != nil {
			return sdk.EmbedResult{}, cerr
		}
		return sdk.EmbedResult{}, classifyEmbed(err)
	}
	res := sdk.EmbedResult{Embedding: embedding, PromptTokens: uint32(len(req.TokenIDs))}
	if n, err := strconv.ParseUint(meta["prompt_tokens"], 10, 32); err == nil {
		res.PromptTokens = uint32(n)
	}
	return res, nil
}

// isEmbedding reads GetModelInfo's json_info: an embedding model says
// is_generation false. A missing key or a null is a generation model.
func isEmbedding(modelJSON string) (bool, error) {
	var info struct {
		IsGeneration *bool `json:"is_generation"`
	}
	if err := json.Unmarshal([]byte(orEmpty(modelJSON)), &info); err != nil {
		return false, fmt.Errorf("GetModelInfo json_info: %w", err)
	}
	return info.IsGeneration != nil && !*info.IsGeneration, nil
}

// classifyEmbed is adapterkit.Classify's mapping, and UNIMPLEMENTED (a
// server without the embedding RPCs) as sdk.ErrUnimplemented.
func classifyEmbed(err error) error {
	if st, _ := status.FromError(err); st.Code() == codes.Unimplemented {
		return fmt.Errorf("%w: %s does not serve embeddings: %s", sdk.ErrUnimplemented, engine, st.Message())
	}
	return adapterkit.Classify(engine, err, false)
}
