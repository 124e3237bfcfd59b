package tokenizer

import "fmt"

// FieldError is a tokenizer.json the package refuses: a field whose value
// it does not support or cannot read, named by its JSON path (such as
// "model.type" or "pre_tokenizer.pretokenizers[1].behavior").
type FieldError struct {
	// Field is the JSON path of the field at fault.
	Field string
	// Value is the value found, as it appears in the file (shortened).
	Value string
	// Reason says what is allowed or what is wrong.
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("tokenizer.json: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("tokenizer.json: %s %s: %s", e.Field, e.Value, e.Reason)
}
