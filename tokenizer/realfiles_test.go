package tokenizer

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// The fixture families' files load (shared with the other tests, one Load
// each), and a 20,000-character pre-token is merged in well under a
// second.
func TestRealFilesCore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("large files")
	}
	for _, fam := range []string{"gemma3", "llama3", "qwen3"} {
		t.Run(fam, func(t *testing.T) {
			t.Parallel()
			tok, err := loadFamily(fam)
			if errors.Is(err, fs.ErrNotExist) {
				t.Skip("no model files: run make tokenizer-models")
			}
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
