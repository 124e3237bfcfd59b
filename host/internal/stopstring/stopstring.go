// Package stopstring matches stop strings on streamed text, as vLLM does on
// its own detokenized output: the text is emitted up to the first stop
// string, which is not emitted, and text that may yet start a stop string
// is held back until the next piece decides it.
package stopstring

import "strings"

// Matcher finds the first of its stop strings in text pushed piece by
// piece. The zero value, or one without stop strings, passes text through.
// A Matcher is not safe for concurrent use.
type Matcher struct {
	stops   []string
	longest int
	held    string
	stopped bool
}

// New returns a Matcher for stops; empty strings are ignored.
func New(stops []string) *Matcher {
	m := &Matcher{}
	for _, s := range stops {
		if s == "" {
			continue
		}
		m.stops = append(m.stops, s)
		m.longest = max(m.longest, len(s))
	}
	return m
}

// Push adds the next piece of text. It returns the text that can be
// emitted now and whether a stop string matched; after a match, the
// matched string and everything after it are dropped, and later pushes
// return nothing.
func (m *Matcher) Push(piece string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	if len(m.stops) == 0 {
		return piece, false
	}
	text := m.held + piece
	// Only the held text and the new piece can hold a match that has not
	// been looked for yet.
	if i := m.first(text); i >= 0 {
		m.stopped, m.held = true, ""
		return text[:i], true
	}
	keep := m.partial(text)
	m.held = text[len(text)-keep:]
	return text[:len(text)-keep], false
}

// Flush returns the held text once the stream ended without a match.
func (m *Matcher) Flush() string {
	if m.stopped {
		return ""
	}
	h := m.held
	m.held = ""
	return h
}

// Held returns the text held back now, which Push has not emitted: what
// a stream cut now loses unless another Matcher is pushed it first.
func (m *Matcher) Held() string { return m.held }

// Stopped reports whether a stop string matched.
func (m *Matcher) Stopped() bool { return m.stopped }

// first returns the index of the earliest stop string in text, or -1.
func (m *Matcher) first(text string) int {
	best := -1
	for _, s := range m.stops {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// partial returns the length of the longest suffix of text that is a
// proper prefix of a stop string: that text may still become a match.
func (m *Matcher) partial(text string) int {
	n := min(len(text), m.longest-1)
	for k := n; k > 0; k-- {
		suffix := text[len(text)-k:]
		for _, s := range m.stops {
			if len(s) > k && strings.HasPrefix(s, suffix) {
				return k
			}
		}
	}
	return 0
}
