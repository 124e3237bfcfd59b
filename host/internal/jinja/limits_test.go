package jinja

import (
	"strings"
	"testing"
	"time"
)

// TestLimits: hostile templates end quickly with vigil's limit error,
// not a hang, a huge allocation or a panic.
func TestLimits(t *testing.T) {
	for _, src := range []string{
		"{% for i in range(100000) %}{% set y = 'x' * 10000000 %}{% endfor %}",
		"{% for i in range(100000) %}{% set y = range(100000)|list %}{% endfor %}",
		"{{ 'ab' * 4611686018427387904 }}",
		"{{ [1, 2] * 4611686018427387904 }}",
		"{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
		"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
	} {
		start := time.Now()
		_, err := render(src, nil)
		if err == nil || strings.Contains(err.Error(), "engine failed") {
			t.Errorf("%s: err = %v, want a limit error", src, err)
		}
		t.Logf("%s: %v", src, time.Since(start))
		if d := time.Since(start); d > 20*time.Second { // -race on a shared machine
			t.Errorf("%s: took %v", src, d)
		}
	}
}
