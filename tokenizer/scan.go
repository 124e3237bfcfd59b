package tokenizer

// A small scanner for the large parts of tokenizer.json: model.vocab (an
// object of token to id) and model.merges. Own code rather than
// encoding/json, which decodes through reflection and allocates a map
// entry and strings per element: on gemma3's 262k-token vocabulary and
// merges that was about 3 s of CPU at Load and a heap many times the
// result's. Strings are unescaped exactly as encoding/json does (every
// escape, \uXXXX with surrogate pairs, a lone surrogate or invalid UTF-8
// as U+FFFD); FuzzScan checks it against encoding/json.

import (
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

type scanner struct {
	b []byte
	i int
}

var errSyntax = errors.New("malformed JSON")

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// lit consumes the literal (a byte or "null") if it comes next.
func (s *scanner) lit(l string) bool {
	s.ws()
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// str reads a JSON string.
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", errSyntax
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !utf8.Valid(raw) {
				return string(appendValid(nil, raw)), nil
			}
			return string(raw), nil
		case c == '\\':
			return s.slowStr(start)
		case c < 0x20:
			return "", errSyntax
		}
		s.i++
	}
	return "", errSyntax
}

// slowStr reads the rest of a string holding escapes.
func (s *scanner) slowStr(start int) (string, error) {
	buf := make([]byte, 0, s.i-start+16)
	buf = appendValid(buf, s.b[start:s.i])
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			var err error
			if buf, err = s.escape(buf); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			buf = utf8.AppendRune(buf, r) // invalid bytes: U+FFFD, as encoding/json
			s.i += size
		}
	}
	return "", errSyntax
}

// escape appends the escape at s.i (its backslash).
func (s *scanner) escape(buf []byte) ([]byte, error) {
	if s.i+1 >= len(s.b) {
		return nil, errSyntax
	}
	c := s.b[s.i+1]
	s.i += 2
	if k := strings.IndexByte(`"\/bfnrt`, c); k >= 0 {
		return append(buf, "\"\\/\b\f\n\r\t"[k]), nil
	}
	if c != 'u' {
		return nil, errSyntax
	}
	r, ok := s.hex4()
	if !ok {
		return nil, errSyntax
	}
	if utf16.IsSurrogate(r) {
		// A pair is one character; a lone half is U+FFFD and what
		// follows it is read on its own, as encoding/json does.
		save := s.i
		if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			s.i += 2
			if r2, ok := s.hex4(); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return utf8.AppendRune(buf, d), nil
				}
			}
		}
		s.i = save
		r = utf8.RuneError
	}
	return utf8.AppendRune(buf, r), nil
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	s.i += 4
	return r, true
}

// uint32 reads a non-negative integer that fits 32 bits.
func (s *scanner) uint32() (uint32, error) {
	s.ws()
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + uint64(s.b[s.i]-'0')
		if v > 1<<32-1 {
			return 0, errors.New("an id out of range")
		}
		s.i++
	}
	n := s.i - start
	if n == 0 || (n > 1 && s.b[start] == '0') {
		return 0, errSyntax
	}
	if s.i < len(s.b) && strings.IndexByte(".eE", s.b[s.i]) >= 0 {
		return 0, errors.New("an id must be a non-negative integer")
	}
	return uint32(v), nil
}

// list reads a JSON array (or null, no element), calling elem per element.
func (s *scanner) list(elem func() error) error {
	if s.lit("null") {
		return nil
	}
	if !s.lit("[") {
		return errSyntax
	}
	if s.lit("]") {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if s.lit("]") {
			return nil
		}
		if !s.lit(",") {
			return errSyntax
		}
	}
}

// end checks that nothing but white space follows.
func (s *scanner) end() error {
	if s.peek() != 0 {
		return errSyntax
	}
	return nil
}

// scanVocab reads model.vocab: nil for null.
func scanVocab(raw []byte) (map[string]uint32, error) {
	s := &scanner{b: raw}
	if s.lit("null") {
		return nil, s.end()
	}
	if !s.lit("{") {
		return nil, errors.New("an object of token to id expected")
	}
	// About one entry per 12 bytes: one allocation for the map.
	v := make(map[string]uint32, len(raw)/12)
	if s.lit("}") {
		return v, s.end()
	}
	for {
		k, err := s.str()
		if err != nil {
			return nil, err
		}
		if !s.lit(":") {
			return nil, errSyntax
		}
		id, err := s.uint32()
		if err != nil {
			return nil, err
		}
		v[k] = id
		if s.lit("}") {
			return v, s.end()
		}
		if !s.lit(",") {
			return nil, errSyntax
		}
	}
}

// scanStrings reads a list of strings (null elements: "", as
// encoding/json gives); null is none.
func scanStrings(s *scanner, each func(string)) error {
	return s.list(func() error {
		if s.lit("null") {
			each("")
			return nil
		}
		v, err := s.str()
		if err == nil {
			each(v)
		}
		return err
	})
}

// scanPairs reads [["a", "b"], ...]; a pair holds the strings found.
func scanPairs(raw []byte) ([][]string, error) {
	s := &scanner{b: raw}
	var out [][]string
	err := s.list(func() error {
		var p []string
		err := scanStrings(s, func(v string) { p = append(p, v) })
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, s.end()
}

// scanLines reads ["a b", ...].
func scanLines(raw []byte) ([]string, error) {
	s := &scanner{b: raw}
	var out []string
	if err := scanStrings(s, func(v string) { out = append(out, v) }); err != nil {
		return nil, err
	}
	return out, s.end()
}

// appendValid appends b with each invalid byte as U+FFFD, as encoding/json.
func appendValid(buf, b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		buf = utf8.AppendRune(buf, r)
		b = b[size:]
	}
	return buf
}
