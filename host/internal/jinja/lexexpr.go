package jinja

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }

var operators = []string{"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// tag lexes the expression tokens of a {{ }} or {% %} tag.
func (l *lexer) tag(begin tokKind, end string) error {
	endKind := tVarEnd
	if begin == tBlockBegin {
		endKind = tBlockEnd
	}
	l.emit(begin, "")
	depth := 0
	for l.pos < len(l.src) {
		s := l.src[l.pos:]
		r, n := decodeRune(s)
		if isPySpace(r) {
			l.line += strings.Count(s[:n], "\n")
			l.pos += n
			continue
		}
		if depth == 0 && l.endTag(end) {
			l.toks = append(l.toks, token{kind: endKind, line: l.line})
			return nil
		}
		if err := l.exprToken(s, &depth); err != nil {
			return err
		}
	}
	if begin == tBlockBegin {
		return l.errf("unexpected end of template, expected 'end of statement block'")
	}
	return l.errf("unexpected end of template, expected 'end of print statement'")
}

func (l *lexer) exprToken(s string, depth *int) error {
	r, _ := decodeRune(s)
	switch {
	case r == '\'' || r == '"':
		return l.stringToken(s)
	case r >= '0' && r <= '9':
		return l.numberToken(s)
	case r == '_' || unicode.IsLetter(r):
		j := 0
		for j < len(s) {
			c, n := decodeRune(s[j:])
			if c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
				break
			}
			j += n
		}
		l.toks = append(l.toks, token{kind: tName, val: s[:j], line: l.line})
		l.pos += j
		return nil
	}
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			switch op {
			case "(", "[", "{":
				*depth++
			case ")", "]", "}":
				if *depth == 0 {
					return l.errf("unexpected '%s'", op)
				}
				*depth--
			}
			l.toks = append(l.toks, token{kind: tOp, val: op, line: l.line})
			l.pos += len(op)
			return nil
		}
	}
	return l.errf("unexpected char %s at %d", pyRepr(string(r)), l.pos)
}

func (l *lexer) stringToken(s string) error {
	q := s[0]
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			v := unescape(s[1:j])
			l.toks = append(l.toks, token{kind: tString, val: v, line: l.line})
			l.line += strings.Count(s[:j], "\n")
			l.pos += j + 1
			return nil
		}
	}
	return l.errf("unexpected char %s at %d", pyRepr(string(q)), l.pos)
}

// unescape decodes Python's escapes as unicode-escape does.
func unescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		c := s[i]
		if simple, ok := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}[c]; ok {
			b.WriteString(simple)
			continue
		}
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if width > 0 && i+1+width <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32); err == nil {
				b.WriteRune(rune(v))
				i += width
				continue
			}
		}
		if c >= '0' && c <= '7' {
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteRune(rune(v))
			i = j - 1
			continue
		}
		b.WriteByte('\\')
		b.WriteByte(c)
	}
	return b.String()
}

func (l *lexer) numberToken(s string) error {
	j := 0
	isFloat := false
	digits := func() {
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9') {
			j++
		}
	}
	if len(s) > 1 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
		j = 2
		for j < len(s) && (isHex(s[j]) || s[j] == '_') {
			j++
		}
		v, err := strconv.ParseInt(s[:j], 0, 64)
		if err != nil {
			return l.errf("integer literal %s is out of range", s[:j])
		}
		l.toks = append(l.toks, token{kind: tInt, val: s[:j], num: v, line: l.line})
		l.pos += j
		return nil
	}
	digits()
	if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		j++
		digits()
		isFloat = true
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			j = k
			digits()
			isFloat = true
		}
	}
	text := strings.ReplaceAll(s[:j], "_", "")
	if isFloat {
		f, _ := strconv.ParseFloat(text, 64)
		l.toks = append(l.toks, token{kind: tFloat, val: s[:j], num: f, line: l.line})
	} else {
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return l.errf("integer literal %s is out of range", text)
		}
		l.toks = append(l.toks, token{kind: tInt, val: s[:j], num: v, line: l.line})
	}
	l.pos += j
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
