package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

type tokKind int

const (
	tData tokKind = iota
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
)

type token struct {
	kind tokKind
	val  string
	line int
	num  any // int64 or float64 for tInt, tFloat
}

// lexer turns a template into tokens as jinja2's lexer does with
// trim_blocks and lstrip_blocks on.
type lexer struct {
	src          string
	pos, line    int
	lineStarting bool
	toks         []token
}

// normalize applies jinja2's newline handling: every newline is "\n"
// and one trailing newline is dropped (keep_trailing_newline=False).
func normalize(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	return strings.TrimSuffix(src, "\n")
}

func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) || r == 0x85
}

func pyRstrip(s string) string { return strings.TrimRightFunc(s, isPySpace) }

func lex(src string) ([]token, error) {
	l := &lexer{src: normalize(src), line: 1, lineStarting: true}
	for l.pos < len(l.src) {
		if err := l.root(); err != nil {
			return nil, err
		}
	}
	l.toks = append(l.toks, token{kind: tEOF, line: l.line})
	return l.toks, nil
}

func (l *lexer) errf(format string, a ...any) error {
	return &Error{Line: l.line, Msg: fmt.Sprintf(format, a...)}
}

// root reads text up to the next tag, then the tag.
func (l *lexer) root() error {
	rest := l.src[l.pos:]
	i := indexTag(rest)
	if i < 0 {
		l.emit(tData, rest)
		l.pos = len(l.src)
		return nil
	}
	text, kind := rest[:i], rest[i+1]
	sign := byte(0)
	if i+2 < len(rest) && (rest[i+2] == '-' || rest[i+2] == '+') {
		sign = rest[i+2]
	}
	rawEnd, isRaw := matchRaw(rest[i:])
	switch {
	case sign == '-':
		text = pyRstrip(text)
	case sign != '+' && kind != '{':
		lp := strings.LastIndexByte(text, '\n') + 1
		if (lp > 0 || l.lineStarting) && lp < len(text) && strings.TrimFunc(text[lp:], isPySpace) == "" {
			text = text[:lp]
		}
	}
	l.emit(tData, text)
	l.line += strings.Count(rest[len(text):i], "\n")
	l.pos += i + 2
	if sign != 0 {
		l.pos++
	}
	if isRaw {
		l.pos = l.pos - 2 - boolInt(sign != 0) + rawEnd
		return l.raw()
	}
	switch kind {
	case '#':
		return l.comment()
	case '{':
		return l.tag(tVarBegin, "}}")
	}
	return l.tag(tBlockBegin, "%}")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func indexTag(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// matchRaw reports whether s starts with {% raw %} and its length.
func matchRaw(s string) (int, bool) {
	if !strings.HasPrefix(s, "{%") {
		return 0, false
	}
	j := 2
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	j = skipSpace(s, j)
	if !strings.HasPrefix(s[j:], "raw") {
		return 0, false
	}
	j = skipSpace(s, j+3)
	if strings.HasPrefix(s[j:], "-%}") {
		return skipSpace(s, j+3), true
	}
	if strings.HasPrefix(s[j:], "%}") {
		return j + 2, true
	}
	return 0, false
}

func skipSpace(s string, j int) int {
	for j < len(s) {
		r := rune(s[j])
		if r >= 0x80 || !isPySpace(r) {
			break
		}
		j++
	}
	return j
}

func (l *lexer) emit(k tokKind, v string) {
	if k == tData && v == "" {
		return
	}
	l.toks = append(l.toks, token{kind: k, val: v, line: l.line})
	l.line += strings.Count(v, "\n")
}

// endTag consumes a block or comment end with its whitespace control.
func (l *lexer) endTag(end string) bool {
	s := l.src[l.pos:]
	switch {
	case end != "}}" && strings.HasPrefix(s, "+"+end): // jinja2 has no +}}
		l.pos += 3
	case strings.HasPrefix(s, "-"+end):
		j := 3
		for j < len(s) {
			r, n := decodeRune(s[j:])
			if !isPySpace(r) {
				break
			}
			j += n
		}
		l.line += strings.Count(s[:j], "\n")
		l.pos += j
	case strings.HasPrefix(s, end):
		l.pos += 2
		if end != "}}" && strings.HasPrefix(s[2:], "\n") {
			l.pos++
			l.line++
		}
	default:
		return false
	}
	l.lineStarting = l.src[l.pos-1] == '\n'
	return true
}

func (l *lexer) comment() error {
	for l.pos < len(l.src) {
		if l.src[l.pos] == '\n' {
			l.line++
		}
		if l.endTag("#}") {
			return nil
		}
		l.pos++
	}
	return l.errf("Missing end of comment tag")
}

func (l *lexer) raw() error {
	start := l.pos
	for i := l.pos; i < len(l.src); i++ {
		s := l.src[i:]
		if !strings.HasPrefix(s, "{%") {
			continue
		}
		j := 2
		sign := byte(0)
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			sign = s[j]
			j++
		}
		j = skipSpace(s, j)
		if !strings.HasPrefix(s[j:], "endraw") {
			continue
		}
		j = skipSpace(s, j+6)
		text := l.src[start:i]
		if sign == '-' {
			text = pyRstrip(text)
		}
		l.emit(tData, text)
		l.line += strings.Count(l.src[start+len(text):i], "\n")
		l.pos = i + j
		if !l.endTag("%}") {
			return l.errf("Missing end of raw directive")
		}
		return nil
	}
	return l.errf("Missing end of raw directive")
}
