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
