package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFailureModesNameTests holds the README's "Failure modes" table to the
// tests it cites: each one named there is a test of this package, so that a
// renamed or removed test cannot leave a row claiming a proof it lost.
func TestFailureModesNameTests(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Failure modes\n")
	if !ok {
		t.Fatal(`README.md has no "## Failure modes" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	cited := regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9]*`).FindAllString(sec, -1)
	if len(cited) < 10 {
		t.Fatalf("the Failure modes table cites %d tests, want one or more per row", len(cited))
	}
	for _, name := range cited {
		if name == "TestX" { // the placeholder in the section's introduction
			continue
		}
		if !strings.Contains(src.String(), "func "+name+"(t *testing.T)") {
			t.Errorf("README's Failure modes table cites %s, which is not a test in e2e", name)
		}
	}
}
