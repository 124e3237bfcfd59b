package sdk_test

import (
	"errors"
	"fmt"

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
