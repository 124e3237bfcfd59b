package tokenizer

import (
	"fmt"

	"github.com/dlclark/regexp2"
)

// compileRegexp is regexp2.Compile behind a recover boundary: regexp2's
// parser and code writer panic on some states a pattern from a
// tokenizer.json could reach (an unknown op code, an unknown Unicode
// category), and a bad file must be an error, not a crash. tools/lint's
// TestNothingFatal treats this function as the boundary.
func compileRegexp(pattern string) (re *regexp2.Regexp, err error) {
	defer func() {
		if r := recover(); r != nil {
			re, err = nil, fmt.Errorf("regexp2 failed on the pattern: %v", r)
		}
	}()
	return regexp2.Compile(pattern, regexp2.None)
}
