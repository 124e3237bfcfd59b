package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/vigilhq/vigil/sdk"
)

// An adapter names the request field at fault; the host, which sees the
// same *FieldError after the plugin boundary, names its own setting for it.
func ExampleFieldError() {
	// The adapter's Start:
	err := fmt.Errorf("vLLM adapter: %w", &sdk.FieldError{
		Field:   sdk.FieldOptions,
		Problem: `"tp": unknown key; this adapter accepts mode`,
	})
	fmt.Println(err)

	// The host:
	var fe *sdk.FieldError
	if errors.As(err, &fe) && fe.Field == sdk.FieldOptions {
		fmt.Println("--engine-option " + fe.Problem)
	}
	fmt.Println(errors.Is(err, sdk.ErrInvalidArgument))
	// Output:
	// vLLM adapter: invalid argument: StartRequest.Options "tp": unknown key; this adapter accepts mode
	// --engine-option "tp": unknown key; this adapter accepts mode
	// true
}

// An adapter lists in Worker.Accepts what its engine takes, and maps each
// kind of structured output it listed onto the engine's own guided
// decoding; the host never sets a kind the adapter did not list (it turns
// a choice into a regex itself for an engine with regex only).
func ExampleStructuredOutput() {
	worker := sdk.Worker{ModelID: "llama", Accepts: "json_schema,regex,presence_penalty"}
	fmt.Println(worker.Accepts)

	// The adapter's Generate, for a guided decoding with two fields:
	guide := func(o *sdk.StructuredOutput) (kind, text string, err error) {
		switch o.Kind {
		case sdk.StructuredJSONSchema:
			return "json", o.Text, nil
		case sdk.StructuredRegex:
			return "regex", o.Text, nil
		}
		return "", "", fmt.Errorf("%w: structured_output: this engine takes a JSON schema or a regex", sdk.ErrInvalidArgument)
	}
	req := sdk.GenerateRequest{Text: "Hi", StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: "(yes|no)"}}
	fmt.Println(guide(req.StructuredOutput))
	// Output:
	// json_schema,regex,presence_penalty
	// regex (yes|no) <nil>
}

// embedder is an adapter's Embedder: here, a toy engine whose embedding is
// the input's length and its last token, normalized.
type embedder struct{}

func (embedder) Embed(_ context.Context, req sdk.EmbedRequest) (sdk.EmbedResult, error) {
	if req.Dimensions != 0 {
		return sdk.EmbedResult{}, &sdk.FieldError{Field: "dimensions", Problem: "this engine cannot truncate embeddings"}
	}
	if req.TokenIDs == nil {
		return sdk.EmbedResult{}, &sdk.FieldError{Field: "input", Problem: "this engine takes token ids only"}
	}
	n, last := float64(len(req.TokenIDs)), float64(req.TokenIDs[len(req.TokenIDs)-1])
	norm := math.Hypot(n, last)
	return sdk.EmbedResult{Embedding: []float32{float32(n / norm), float32(last / norm)}, PromptTokens: uint32(n)}, nil
}

// An adapter whose engine serves an embedding model implements
// sdk.Embedder, claims Capabilities.Embed in its Info and lists
// sdk.CapEmbed in the Worker it returns from Start; the host then sends
// it embedding requests and no generation requests.
func ExampleEmbedder() {
	caps := sdk.Capabilities{Readiness: true, Embed: true}
	worker := sdk.Worker{ModelID: "e5", Accepts: sdk.CapEmbed}
	fmt.Println(caps.Embed, worker.Accepts)

	var e sdk.Embedder = embedder{}
	res, err := e.Embed(context.Background(), sdk.EmbedRequest{RequestID: "r1", TokenIDs: []uint32{5, 4}})
	fmt.Println(res.Embedding, res.PromptTokens, err)
	_, err = e.Embed(context.Background(), sdk.EmbedRequest{RequestID: "r2", Text: "hi"})
	fmt.Println(err)
	// Output:
	// true embed
	// [0.4472136 0.8944272] 2 <nil>
	// invalid argument: input this engine takes token ids only
}
