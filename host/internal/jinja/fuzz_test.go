package jinja

import (
	"strings"
	"testing"
)

// FuzzRender compiles and renders arbitrary templates with the corpus'
// context: no panic escapes (the recover boundary's "engine failed"
// counts as one) and the output limit holds. Its seeds, the corpus
// templates, run in every go test.
func FuzzRender(f *testing.F) {
	cases := loadCorpus(f)
	for _, c := range cases {
		f.Add(c.Template)
	}
	vars := caseVars(f, cases[0].Context)
	f.Fuzz(func(t *testing.T, src string) {
		tm, err := Compile(src)
		if err != nil {
			if strings.Contains(err.Error(), "engine failed") {
				t.Fatalf("Compile(%q): %v", src, err)
			}
			return
		}
		out, err := tm.Render(vars)
		if err != nil && strings.Contains(err.Error(), "engine failed") {
			t.Fatalf("Render(%q): %v", src, err)
		}
		if len(out) > maxOutput {
			t.Fatalf("Render(%q): %d bytes, over the limit", src, len(out))
		}
	})
}
