package tokenizer

import "testing"

// TestCompileRegexp: a pattern compiles, and a bad one is an error
// whether regexp2 returns it or panics.
func TestCompileRegexp(t *testing.T) {
	if re, err := compileRegexp(`\p{L}+`); err != nil || re == nil {
		t.Fatalf(`compileRegexp(\p{L}+) = %v, %v`, re, err)
	}
	for _, bad := range []string{`(`, `\p{NoSuchCategory}`, `[a-`} {
		if re, err := compileRegexp(bad); err == nil || re != nil {
			t.Errorf("compileRegexp(%q) = %v, %v: want an error", bad, re, err)
		}
	}
}
