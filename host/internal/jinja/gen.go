package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Gen is an iterator Python would not print as a list: a generator
// (kind "", printing refused since Python prints its address), a dict
// view or a range (kind names it; repr is Python's).
type Gen struct {
	items []any
	kind  string
	repr  string
}

func generator(items []any) *Gen { return &Gen{items: items} }

func view(kind string, items []any) *Gen {
	return &Gen{items: items, kind: kind, repr: kind + "(" + pyRepr(items) + ")"}
}

// attrer and callee are the objects with attributes and methods of
// their own: the loop, cycler and joiner.
type attrer interface{ attr(name string) any }

type callee interface {
	call(name string, args []any) (any, error)
}

// Python's full case mappings (ß upper is SS), not Go's simple ones.
var (
	upperCaser = cases.Upper(language.Und)
	lowerCaser = cases.Lower(language.Und)
)

func pyUpper(s string) string { return upperCaser.String(s) }
func pyLower(s string) string { return lowerCaser.String(s) }

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// capitalize is str.capitalize: the first character in title case, the
// rest lower.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return titleRune(r) + pyLower(s[n:])
}

func titleRune(r rune) string {
	up := pyUpper(string(r))
	if utf8.RuneCountInString(up) == 1 {
		return string(unicode.ToTitle(r))
	}
	return up
}

// pyStrip is str.strip(chars): Python's whitespace when chars is None.
func pyStrip(s string, chars any, left, right bool) (string, error) {
	var cut func(rune) bool
	switch c := chars.(type) {
	case nil:
		cut = isPySpace
	case string:
		cut = func(r rune) bool { return strings.ContainsRune(c, r) }
	default:
		return "", typeErr("strip arg must be None or str")
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

// pySplitlines is str.splitlines() (without keepends).
func pySplitlines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, s[start:i])
			if r == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				n++
			}
			start = i + n
		}
		i += n
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// softStr is jinja2's soft_str: str() of the value, "" for Undefined.
func softStr(v any) string { return pyStr(v) }
