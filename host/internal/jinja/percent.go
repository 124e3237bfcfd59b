package jinja

import (
	"strconv"
	"strings"
)

// percentFormat is Python's str % args.
func percentFormat(f string, args any) (any, error) {
	list, isTuple := args.(Tuple)
	if !isTuple {
		list = Tuple{args}
	}
	mapping, _ := args.(*Dict)
	var b strings.Builder
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		i++
		if i >= len(f) {
			return nil, typeErr("incomplete format")
		}
		var key *string
		if f[i] == '(' {
			j := strings.IndexByte(f[i:], ')')
			if j < 0 {
				return nil, typeErr("incomplete format key")
			}
			k := f[i+1 : i+j]
			key = &k
			i += j + 1
		}
		spec := i
		for i < len(f) && strings.IndexByte("-+ #0123456789.", f[i]) >= 0 {
			i++
		}
		if i >= len(f) {
			return nil, typeErr("incomplete format")
		}
		conv := f[i]
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		v, err := percentArg(key, mapping, list, &n)
		if err != nil {
			return nil, err
		}
		s, err := formatOne(f[spec:i], conv, v)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	if key := mapping; key == nil && n < len(list) {
		return nil, typeErr("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

type fmtSpec struct {
	left, plus, space, zero, alt bool
	width, prec                  int
}

func parseSpec(s string) fmtSpec {
	sp := fmtSpec{prec: -1}
	i := 0
	for ; i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0; i++ {
		switch s[i] {
		case '-':
			sp.left = true
		case '+':
			sp.plus = true
		case ' ':
			sp.space = true
		case '#':
			sp.alt = true
		case '0':
			sp.zero = true
		}
	}
	w, p, hasP := strings.Cut(s[i:], ".")
	sp.width, _ = strconv.Atoi(w)
	if hasP {
		sp.prec, _ = strconv.Atoi(p)
	}
	return sp
}

func formatOne(spec string, conv byte, v any) (string, error) {
	sp := parseSpec(spec)
	var s string
	numeric := false
	switch conv {
	case 's':
		s = pyStr(v)
		if sp.prec >= 0 && sp.prec < len([]rune(s)) {
			s = string([]rune(s)[:sp.prec])
		}
	case 'r', 'a':
		s = pyRepr(v)
	case 'd', 'i', 'u', 'x', 'X', 'o':
		i, f, isF, ok := num(v)
		if !ok {
			return "", typeErr("%%%c format: a real number is required, not %s", conv, typeName(v))
		}
		if isF {
			var err error
			if i, err = checkInt(f); err != nil {
				return "", err
			}
		}
		s, numeric = intDigits(i, conv, sp), true
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if _, _, _, ok := num(v); !ok {
			return "", typeErr("must be real number, not %s", typeName(v))
		}
		s, numeric = floatDigits(toFloat(v), conv, sp), true
	case 'c':
		switch x := v.(type) {
		case int64:
			s = string(rune(x))
		case string:
			s = x
		}
	default:
		return "", typeErr("unsupported format character '%c' (0x%x)", conv, conv)
	}
	return pad(s, sp, numeric), nil
}

func intDigits(i int64, conv byte, sp fmtSpec) string {
	neg := i < 0
	u := uint64(i)
	if neg {
		u = uint64(-i)
	}
	base := map[byte]int{'x': 16, 'X': 16, 'o': 8}[conv]
	if base == 0 {
		base = 10
	}
	s := strconv.FormatUint(u, base)
	if conv == 'X' {
		s = strings.ToUpper(s)
	}
	for len(s) < sp.prec {
		s = "0" + s
	}
	if sp.alt && base != 10 {
		s = "0" + string(conv) + s
	}
	return sign(neg, sp) + s
}

func sign(neg bool, sp fmtSpec) string {
	switch {
	case neg:
		return "-"
	case sp.plus:
		return "+"
	case sp.space:
		return " "
	}
	return ""
}

func floatDigits(f float64, conv byte, sp fmtSpec) string {
	prec := sp.prec
	if prec < 0 {
		prec = 6
	}
	neg := f < 0 || f == 0 && 1/f < 0
	if neg {
		f = -f
	}
	var s string
	switch conv {
	case 'f', 'F':
		s = strconv.FormatFloat(f, 'f', prec, 64)
	case 'e', 'E':
		s = pyExp(strconv.FormatFloat(f, 'e', prec, 64))
	default:
		if prec == 0 {
			prec = 1
		}
		s = pyExp(strconv.FormatFloat(f, 'g', prec, 64))
	}
	if conv == 'F' || conv == 'E' || conv == 'G' {
		s = strings.ToUpper(s)
	}
	return sign(neg, sp) + s
}

// pyExp writes Go's exponent e+1 as Python's e+01.
func pyExp(s string) string {
	i := strings.IndexAny(s, "eE")
	if i < 0 || len(s)-i != 3 {
		return s
	}
	return s[:i+2] + "0" + s[i+2:]
}

func pad(s string, sp fmtSpec, numeric bool) string {
	n := len([]rune(s))
	if n >= sp.width {
		return s
	}
	fill := strings.Repeat(" ", sp.width-n)
	switch {
	case sp.left:
		return s + fill
	case sp.zero && numeric:
		z := strings.Repeat("0", sp.width-n)
		if s != "" && strings.IndexByte("+- ", s[0]) >= 0 {
			return s[:1] + z + s[1:]
		}
		return z + s
	}
	return fill + s
}

func percentArg(key *string, mapping *Dict, list Tuple, n *int) (any, error) {
	switch {
	case key != nil:
		if mapping == nil {
			return nil, typeErr("format requires a mapping")
		}
		v, ok := mapping.Get(*key)
		if !ok {
			return nil, &Error{Msg: pyRepr(*key)}
		}
		return v, nil
	case *n < len(list):
		*n++
		return list[*n-1], nil
	}
	return nil, typeErr("not enough arguments for format string")
}
