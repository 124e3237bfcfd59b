package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestFailureModesNameTests holds the "Failure modes" table of
// docs/operating.md to the tests it cites: each one named there is a test
// of this package, so that a renamed or removed test cannot leave a row
// claiming a proof it lost.
func TestFailureModesNameTests(t *testing.T) {
	sec := section(t, "../docs/operating.md", "## Failure modes")
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		src.WriteString(readFile(t, f))
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
			t.Errorf("docs/operating.md's Failure modes table cites %s, which is not a test in e2e", name)
		}
	}
}

// markdownLink is a link's target in Markdown: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve: every relative link of README.md and docs/*.md
// names a file or directory of the repository, and a heading of it when
// the link has an anchor.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{"../README.md"}, docs...) {
		for _, target := range markdownLink.FindAllStringSubmatch(prose(readFile(t, doc)), -1) {
			if err := checkLink(doc, target[1]); err != "" {
				t.Errorf("%s: link %s: %s", strings.TrimPrefix(doc, "../"), target[1], err)
			}
		}
	}
}

// checkLink says what is wrong with the link target of doc, or "".
func checkLink(doc, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := doc
	if path != "" {
		file = filepath.Join(filepath.Dir(doc), path)
	}
	if _, err := os.Stat(file); err != nil {
		return "no such file"
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	for _, a := range anchors(string(b)) {
		if a == anchor {
			return ""
		}
	}
	return "no heading with that anchor"
}

// prose is text without its fenced code blocks, where neither headings
// nor links are.
func prose(text string) string {
	var out strings.Builder
	fenced := false
	for line := range strings.SplitAfterSeq(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out.WriteString(line)
		}
	}
	return out.String()
}

// anchors are the anchors GitHub gives the headings of text: lower case,
// punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for line := range strings.SplitSeq(prose(text), "\n") {
		h := strings.TrimLeft(line, "#")
		if len(h) == len(line) || !strings.HasPrefix(h, " ") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(h))
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}
