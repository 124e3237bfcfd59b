package sdk_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetSources are where the Go snippets of README.md come from: the
// example adapter's module, tested by make example, and this module.
var snippetSources = []string{"../examples/adapter", "."}

// TestREADMESnippets: each Go snippet of the author guide appears verbatim
// in a Go file that is compiled and tested, so the guide's code works as
// written.
func TestREADMESnippets(t *testing.T) {
	if _, err := os.Stat(snippetSources[0]); err != nil {
		t.Skipf("not in vigil's repository: %v", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(snippets) == 0 {
		t.Fatal("README.md has no Go snippet, want some")
	}
	var sources []string
	for _, dir := range snippetSources {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				b, rerr := os.ReadFile(path)
				sources = append(sources, string(b))
				return rerr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range snippets {
		snippet := strings.TrimSpace(string(m[1]))
		found := false
		for _, src := range sources {
			found = found || strings.Contains(src, snippet)
		}
		if !found {
			t.Errorf("README.md's Go snippet appears in no Go file of %s, want it copied from one that is compiled and tested:\n%s", strings.Join(snippetSources, " or "), snippet)
		}
	}
}
