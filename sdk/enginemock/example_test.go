package enginemock_test

import (
	"context"
	"fmt"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk/enginemock"
)

// A mock engine with a liveness signal "" and a readiness signal "ready"
// that fails while generation is paused, its health view printing what it
// hears, and one generation run in process (a real mock calls Generate from
// its gRPC handler and formats each chunk as its engine's message).
func Example() {
	e := enginemock.New(enginemock.Config{
		Signals: []string{"", "ready"},
		Health: func(signal string, c enginemock.Condition) enginemock.Status {
			if !c.Ready || signal == "ready" && c.Paused {
				return healthpb.HealthCheckResponse_NOT_SERVING
			}
			return healthpb.HealthCheckResponse_SERVING
		},
		Publish: func(c enginemock.Change) {
			for _, sig := range c.Changed {
				fmt.Printf("health %q %v\n", sig, c.Health[sig])
			}
		},
		TokensPerMessage: 2,
	})

	err := e.Generate(context.Background(), enginemock.Request{ID: "r1", Prompt: []uint32{1, 2, 3}, Seed: 42, MaxNewTokens: 3},
		func(c enginemock.Chunk) error {
			fmt.Println("tokens", c.Tokens, "last", c.Finish != nil)
			return nil
		})
	fmt.Println("generate:", err)

	e.SetPaused(true)
	e.Stop()
	// Output:
	// health "" NOT_SERVING
	// health "ready" NOT_SERVING
	// health "" SERVING
	// health "ready" SERVING
	// tokens [328 8247] last false
	// tokens [16166] last true
	// generate: <nil>
	// health "ready" NOT_SERVING
	// health "" NOT_SERVING
}

// A test predicts a mock engine's logprobs: output token 2 of a prompt,
// with the 3 likeliest tokens at its position (the token itself ranks 5th).
func ExamplePositionLogprobs() {
	id := enginemock.OutputToken(0, []uint32{1, 2, 3}, 2)
	d := enginemock.PositionLogprobs(id, 3)
	fmt.Printf("token %d: logprob %.4f, rank %d\n", d.Chosen.TokenID, d.Chosen.Logprob, d.Chosen.Rank)
	for _, e := range d.Top {
		fmt.Printf("  %d %.4f\n", e.TokenID, e.Logprob)
	}
	// Output:
	// token 16124: logprob -3.4657, rank 5
	//   16125 -0.6931
	//   16126 -1.3863
	//   16127 -2.0794
}

// An agent loop's two model turns, scripted: the first generation outputs
// a tool call's tokens, the second (and every later one) the answer's, each
// ending at the end of sequence. The token ids stand for a tokenizer's.
func ExampleEngine_ScriptSeq() {
	e := enginemock.New(enginemock.Config{})
	defer e.Stop()
	e.ScriptSeq(
		enginemock.Script{Tokens: []uint32{151657, 515, 151658}, EOS: true},
		enginemock.Script{Tokens: []uint32{9707, 0}, EOS: true},
	)
	for _, id := range []string{"call", "answer", "again"} {
		var out []uint32
		_ = e.Generate(context.Background(), enginemock.Request{ID: id, MaxNewTokens: 16}, func(c enginemock.Chunk) error {
			out = append(out, c.Tokens...)
			if c.Finish != nil {
				fmt.Println(id, out, c.Finish.Reason == enginemock.FinishStop)
			}
			return nil
		})
	}
	// Output:
	// call [151657 515 151658] true
	// answer [9707 0] true
	// again [9707 0] true
}
