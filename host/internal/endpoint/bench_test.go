package endpoint

import (
	"context"
	"testing"

	"github.com/vigilhq/vigil/sdk"
)

// tokenEngine streams n one-token chunks per request, at once.
type tokenEngine struct{ n int }

func (e tokenEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	ids := []uint32{7}
	for range e.n {
		if err := send(sdk.Chunk{TokenIDs: ids, Text: "a"}); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 3, CompletionTokens: uint32(e.n)}, nil
}

func (tokenEngine) Abort(context.Context, []string) error { return nil }

// BenchmarkGenerate is the worker endpoint's own cost per request: a
// 64-token stream over a real gRPC socket from an engine that answers at
// once (the floor under bench's B5 request path).
func BenchmarkGenerate(b *testing.B) {
	s, c := serve(b, tokenEngine{n: 64}, worker, 0)
	s.Admit(true, "")
	ctx := context.Background()
	req := prompt(1, 2, 3)
	for b.Loop() {
		if r := run(ctx, c, req); r.err != nil || r.tokens != 64 {
			b.Fatal(r.err, r.tokens)
		}
	}
	b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkGenerateN4 is BenchmarkGenerate with n = 4: four engine
// requests fanned out onto one stream.
func BenchmarkGenerateN4(b *testing.B) {
	s, c := serve(b, tokenEngine{n: 64}, accepting(vllmAccepts...), 0)
	s.Admit(true, "")
	ctx := context.Background()
	req := prompt(1, 2, 3)
	req.N = 4
	for b.Loop() {
		if r := run(ctx, c, req); r.err != nil || r.tokens != 4*64 {
			b.Fatal(r.err, r.tokens)
		}
	}
	b.ReportMetric(float64(4*64*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
