package vllm_test

import (
	"testing"

	"github.com/vigilhq/vigil/plugins/vllm"
	"github.com/vigilhq/vigil/sdk"
)

// TestNoEmbed: vLLM's gRPC API has no embedding RPC, so the adapter claims no Embed and is no
// sdk.Embedder: the host never calls Embed on it, and its workers never
// list embed.
func TestNoEmbed(t *testing.T) {
	t.Parallel()
	a := vllm.New()
	info, err := a.Info(t.Context())
	if err != nil || info.Capabilities.Embed {
		t.Errorf("Info() = %+v, %v; want no Capabilities.Embed", info, err)
	}
	if _, ok := any(a).(sdk.Embedder); ok {
		t.Error("the adapter is an sdk.Embedder, want none")
	}
}
