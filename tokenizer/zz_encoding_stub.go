package tokenizer

// encoding is a placeholder until tokenizer.go defines what Encode needs.
// (The core helper deletes this file.)
type encoding struct{}
