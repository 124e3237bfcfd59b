package outparse

// unparsed is a call that could not be read: the core counts it and
// gives out raw as content (no function offered is named "").
func unparsed(raw string) piece { return piece{call: &call{raw: raw}} }

// appendText adds content text to ps, joined to a last text piece.
func appendText(ps []piece, s string) []piece {
	if s == "" {
		return ps
	}
	if n := len(ps); n > 0 && ps[n-1].call == nil {
		ps[n-1].text += s
		return ps
	}
	return append(ps, piece{text: s})
}

// valueEnd returns the length of the JSON object or array s begins
// with, found by its brackets outside strings; -1 while it is not closed.
// Whether it is valid JSON is for the decoder to say.
func valueEnd(s string) int {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth <= 0 {
				return i + 1
			}
		}
	}
	return -1
}
