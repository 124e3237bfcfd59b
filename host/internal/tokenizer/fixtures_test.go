package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The families whose tokenizer.json, chat template and reference outputs
// scripts/tokenizer-fixtures/generate.sh provides.
var families = []string{"llama3", "qwen3", "gemma3"}

// requireEnv makes a missing model directory a failure, not a skip: CI
// sets it after make tokenizer-models.
const requireEnv = "VIGIL_REQUIRE_TOKENIZER_MODELS"

type reference struct {
	Family string `json:"family"`
	Texts  []struct {
		Name             string   `json:"name"`
		Text             string   `json:"text"`
		AddSpecialTokens bool     `json:"add_special_tokens"`
		IDs              []uint32 `json:"ids"`
		Decoded          string   `json:"decoded"`
	} `json:"texts"`
	Chats []struct {
		Name                string          `json:"name"`
		Messages            []Message       `json:"messages"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		Tools               json.RawMessage `json:"tools"`  // OpenAI's tools array; absent: none
		Kwargs              json.RawMessage `json:"kwargs"` // chat_template_kwargs; absent: none
		Rendering           *string         `json:"rendering"`
		IDs                 []uint32        `json:"ids"`
		Error               *string         `json:"error"`
	} `json:"chats"`
}

var loaded sync.Map // family -> *loadResult

type loadResult struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// family loads a family's tokenizer (once per test binary) and its
// reference outputs.
func family(tb testing.TB, name string) (*Tokenizer, *reference) {
	tb.Helper()
	dir := familyDir(tb, name)
	v, _ := loaded.LoadOrStore(name, &loadResult{})
	r := v.(*loadResult)
	r.once.Do(func() { r.tok, r.err = Load(dir, "") })
	if r.err != nil {
		tb.Fatalf("Load(%s): %v", dir, r.err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		tb.Fatalf("testdata/%s.json: %v", name, err)
	}
	return r.tok, &ref
}

// familyDir is a family's model directory; without it the test is
// skipped, or fails when CI requires the models.
func familyDir(tb testing.TB, name string) string {
	tb.Helper()
	dir := filepath.Join("testdata", "models", name)
	if _, err := os.Stat(filepath.Join(dir, TokenizerFile)); err != nil {
		if os.Getenv(requireEnv) != "" {
			tb.Fatalf("%s is set but %s is missing: run make tokenizer-models", requireEnv, dir)
		}
		tb.Skipf("%s missing: run make tokenizer-models (CI sets %s)", dir, requireEnv)
	}
	return dir
}
