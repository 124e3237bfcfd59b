package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixture families' files load in the core (their model, added tokens
// and post-processor; the stages of other files nulled until normalize.go
// and pretokenize.go fill the registries), and a 20,000-character
// pre-token is merged in well under a second.
func TestRealFilesCore(t *testing.T) {
	if testing.Short() {
		t.Skip("large files")
	}
	dirs, _ := filepath.Glob("../host/internal/tokenizer/testdata/models/*")
	if len(dirs) == 0 {
		t.Skip("no model files")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, TokenizerFile))
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(data, &top); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"normalizer", "pre_tokenizer", "decoder"} {
				top[k] = json.RawMessage("null")
			}
			data, _ = json.Marshal(top)
			cfg, _ := os.ReadFile(filepath.Join(dir, TokenizerConfigFile))
			tok, err := FromJSON(data, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok.EOSTokenIDs()) != 1 {
				t.Fatalf("EOSTokenIDs = %v", tok.EOSTokenIDs())
			}
			start := time.Now()
			if _, err := tok.Encode(strings.Repeat("ab", 10000), false); err != nil {
				t.Fatal(err)
			}
			t.Logf("vocab %d, a 20,000-byte pre-token in %v", tok.VocabSize(), time.Since(start))
		})
	}
}
