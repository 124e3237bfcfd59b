package jinja

import (
	"math"
	"strconv"
	"strings"
)

type filterFn func(ev *evaluator, v any, a *args) (any, error)

// filters and tests are filled in init: some filters (map, select) look
// them up, which a composite literal may not.
var (
	filters map[string]filterFn
	tests   map[string]testFn
)

// jinja2Filters are jinja2's filters vigil does not implement: refused
// at Compile by name rather than reported as unknown.
var jinja2Filters = map[string]bool{"attr": true, "batch": true, "filesizeformat": true, "forceescape": true,
	"groupby": true, "pprint": true, "random": true, "slice": true, "striptags": true, "urlencode": true,
	"urlize": true, "wordwrap": true, "xmlattr": true}

func init() {
	filters = map[string]filterFn{
		"abs": fAbs, "capitalize": strFilter(capitalize), "center": fCenter, "count": fLength,
		"d": fDefault, "default": fDefault, "dictsort": fDictsort, "e": fEscape, "escape": fEscape,
		"first": fFirst, "float": fFloat, "format": fFormat, "indent": fIndent, "int": fInt,
		"items": fItems, "join": fJoin, "last": fLast, "length": fLength, "list": fList,
		"lower": strFilter(pyLower), "map": fMap, "max": fMinMax(false), "min": fMinMax(true),
		"reject": fSelect(false, false), "rejectattr": fSelect(false, true), "replace": fReplace,
		"reverse": fReverse, "round": fRound, "safe": fString, "select": fSelect(true, false),
		"selectattr": fSelect(true, true), "sort": fSort, "string": fString, "sum": fSum,
		"title": strFilter(jinjaTitle), "tojson": fTojson, "trim": fTrim, "truncate": fTruncate,
		"unique": fUnique, "upper": strFilter(pyUpper), "wordcount": fWordcount,
	}
	tests = testsMap()
}

func (ev *evaluator) applyFilter(fl *filterExpr, v any, f *frame) (any, error) {
	var err error
	switch x := fl.x.(type) {
	case nil:
	case *filterExpr:
		if v, err = ev.applyFilter(x, v, f); err != nil {
			return nil, err
		}
	default:
		if v, err = ev.eval(x, f); err != nil {
			return nil, err
		}
	}
	a, err := ev.args(fl.args, fl.names, fl.kw, f)
	if err != nil {
		return nil, err
	}
	out, err := ev.charge(filters[fl.name](ev, v, a))
	return out, lined(err, fl.line)
}

func strFilter(fn func(string) string) filterFn {
	return func(_ *evaluator, v any, _ *args) (any, error) { return fn(softStr(v)), nil }
}

func undefErr(v any) error {
	if u, ok := v.(*Undefined); ok {
		return u.err()
	}
	return nil
}

func intArg(a *args, i int, name string, def int64) (int64, error) {
	v := a.or(i, name, def)
	n, _, isF, ok := num(v)
	if !ok || isF {
		return 0, typeErr("'%s' object cannot be interpreted as an integer", typeName(v))
	}
	return n, nil
}

func fAbs(_ *evaluator, v any, _ *args) (any, error) {
	if err := undefErr(v); err != nil {
		return nil, err
	}
	i, fl, isF, ok := num(v)
	switch {
	case !ok:
		return nil, typeErr("bad operand type for abs(): '%s'", typeName(v))
	case isF:
		return math.Abs(fl), nil
	case i == math.MinInt64:
		return nil, errOverflow
	case i < 0:
		return -i, nil
	}
	return i, nil
}

func fCenter(_ *evaluator, v any, a *args) (any, error) {
	s := softStr(v)
	w, err := intArg(a, 0, "width", 80)
	if err != nil {
		return nil, err
	}
	n := int64(runeLen(s))
	if w <= n {
		return s, nil
	}
	if w > maxOutput {
		return nil, errTooBig
	}
	marg := w - n
	left := marg/2 + (marg & w & 1)
	return strings.Repeat(" ", int(left)) + s + strings.Repeat(" ", int(marg-left)), nil
}

func fDefault(_ *evaluator, v any, a *args) (any, error) {
	_, isU := v.(*Undefined)
	if isU || truthy(a.or(1, "boolean", false)) && !truthy(v) {
		return a.or(0, "default_value", ""), nil
	}
	return v, nil
}

func fEscape(_ *evaluator, v any, _ *args) (any, error) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(softStr(v)), nil
}

func fString(_ *evaluator, v any, _ *args) (any, error) { return softStr(v), nil }

func fFirst(_ *evaluator, v any, _ *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &Undefined{"No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func fLast(_ *evaluator, v any, _ *args) (any, error) {
	if err := undefErr(v); err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, typeErr("'%s' object is not reversible", typeName(v))
	}
	if len(items) == 0 {
		return &Undefined{"No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

func fFloat(_ *evaluator, v any, a *args) (any, error) {
	def := a.or(0, "default", 0.0)
	switch x := v.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimFunc(strings.ReplaceAll(x, "_", ""), isPySpace), 64)
		if err != nil || strings.HasPrefix(strings.TrimSpace(x), "0x") {
			return def, nil
		}
		return f, nil
	}
	if _, _, _, ok := num(v); ok {
		return toFloat(v), nil
	}
	return def, nil
}

func fInt(_ *evaluator, v any, a *args) (any, error) {
	def := a.or(0, "default", int64(0))
	base, err := intArg(a, 1, "base", 10)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case string:
		t := strings.TrimFunc(x, isPySpace)
		if i, err := parsePyInt(t, base); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && base == 10 {
			return checkInt(math.Trunc(f))
		}
		return def, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return def, nil
		}
		return checkInt(math.Trunc(x))
	}
	if i, _, _, ok := num(v); ok {
		return i, nil
	}
	return def, nil
}

func fFormat(_ *evaluator, v any, a *args) (any, error) {
	if len(a.names) > 0 && len(a.pos) > 0 {
		return nil, typeErr("can't handle positional and keyword arguments at the same time")
	}
	if len(a.names) > 0 {
		d := NewDict()
		for i, n := range a.names {
			_ = d.Set(n, a.kw[i])
		}
		return percentFormat(softStr(v), d)
	}
	return percentFormat(softStr(v), Tuple(a.pos))
}

func fIndent(_ *evaluator, v any, a *args) (any, error) {
	s := softStr(v)
	ind := ""
	switch w := a.or(0, "width", int64(4)).(type) {
	case string:
		ind = w
	default:
		n, _, isF, ok := num(w)
		if !ok || isF || n > maxOutput {
			return nil, typeErr("can't multiply sequence by non-int of type '%s'", typeName(w))
		}
		ind = strings.Repeat(" ", max(0, int(n)))
	}
	lines := pySplitlines(s + "\n")
	var rv string
	if truthy(a.or(2, "blank", false)) {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		rv = lines[0]
		for _, l := range lines[1:] {
			if l != "" {
				l = ind + l
			}
			rv += "\n" + l
		}
	}
	if truthy(a.or(1, "first", false)) {
		rv = ind + rv
	}
	if len(rv) > maxOutput {
		return nil, errTooBig
	}
	return rv, nil
}

func fLength(_ *evaluator, v any, _ *args) (any, error) {
	switch x := v.(type) {
	case string:
		return int64(runeLen(x)), nil
	case []any:
		return int64(len(x)), nil
	case Tuple:
		return int64(len(x)), nil
	case *Dict:
		return int64(x.Len()), nil
	case *Undefined:
		return int64(0), nil
	case *Gen:
		if x.kind != "" {
			return int64(len(x.items)), nil
		}
	case *Namespace:
		return nil, typeErr("object of type 'Namespace' has no len()")
	}
	return nil, typeErr("object of type '%s' has no len()", typeName(v))
}

func fList(_ *evaluator, v any, _ *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return append([]any{}, items...), nil
}

func fItems(_ *evaluator, v any, _ *args) (any, error) {
	switch x := v.(type) {
	case *Undefined:
		return generator(nil), nil
	case *Dict:
		return generator(dictItems(x)), nil
	}
	return nil, typeErr("Can only get item pairs from a mapping.")
}

// parsePyInt is int(s, base): underscores between digits, and for base
// 16, 8 and 2 its prefix.
func parsePyInt(t string, base int64) (int64, error) {
	if strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
		return 0, strconv.ErrSyntax
	}
	t = strings.ReplaceAll(t, "_", "")
	body := strings.TrimLeft(t, "+-")
	prefix := map[int64]string{16: "0x", 8: "0o", 2: "0b"}[base]
	if prefix != "" && len(body) > 2 && strings.EqualFold(body[:2], prefix) {
		t = t[:len(t)-len(body)] + body[2:]
	}
	if base < 2 || base > 36 {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(t, int(base), 64)
}
