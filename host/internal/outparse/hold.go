package outparse

import "strings"

// heldPrefix returns how many bytes at the end of s could begin one of
// markers, so that a marker split across pieces is not emitted as text.
func heldPrefix(s string, markers []string) int {
	n := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, m[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// firstOf returns the index in s of the first of markers and which one;
// -1 when none occurs.
func firstOf(s string, markers []string) (int, string) {
	at, which := -1, ""
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}
