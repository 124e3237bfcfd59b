package jinja

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// attrGetter is jinja2's make_attrgetter: "a.b.0" looks up items in turn.
func attrGetter(attr any) func(any) (any, error) {
	if attr == nil {
		return func(v any) (any, error) { return v, nil }
	}
	var parts []any
	for _, p := range strings.Split(pyStr(attr), ".") {
		if n, err := strconv.ParseInt(p, 10, 64); err == nil {
			parts = append(parts, n)
		} else {
			parts = append(parts, p)
		}
	}
	return func(v any) (any, error) {
		for _, p := range parts {
			var err error
			if v, err = getItem(v, p); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
}

// sortKey lowers strings unless case_sensitive, as jinja2's ignore_case.
func sortKey(v any, caseSensitive bool) any {
	if s, ok := v.(string); ok && !caseSensitive {
		return pyLower(s)
	}
	return v
}

func sortItems(items []any, key func(any) (any, error), cs, reverse bool) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = sortKey(k, cs)
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	slices.SortStableFunc(idx, func(x, y int) int {
		a, b := keys[x], keys[y]
		if reverse {
			a, b = b, a
		}
		lt, err := pyLess(a, b, "<")
		if err != nil && sortErr == nil {
			sortErr = err
		}
		if lt {
			return -1
		}
		if gt, _ := pyLess(b, a, "<"); gt {
			return 1
		}
		return 0
	})
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, sortErr
}

func fSort(_ *evaluator, v any, a *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return sortItems(items, attrGetter(a.or(2, "attribute", nil)), truthy(a.or(1, "case_sensitive", false)), truthy(a.or(0, "reverse", false)))
}

func fDictsort(_ *evaluator, v any, a *args) (any, error) {
	d, ok := v.(*Dict)
	if !ok {
		if err := undefErr(v); err != nil {
			return nil, err
		}
		return nil, typeErr("'%s' object has no attribute 'items'", typeName(v))
	}
	pos := int64(0)
	switch by := a.or(1, "by", "key"); by {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, typeErr("You can only sort by either 'key' or 'value'")
	}
	key := func(it any) (any, error) { return it.(Tuple)[pos], nil }
	return sortItems(dictItems(d), key, truthy(a.or(0, "case_sensitive", false)), truthy(a.or(2, "reverse", false)))
}

func fJoin(_ *evaluator, v any, a *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get := attrGetter(a.or(1, "attribute", nil))
	parts := make([]string, len(items))
	n := 0
	for i, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		parts[i] = softStr(x)
		if n += len(parts[i]); n > maxOutput {
			return nil, errTooBig
		}
	}
	return strings.Join(parts, softStr(a.or(0, "d", ""))), nil
}

func fMap(ev *evaluator, v any, a *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	fn, err := mapFunc(ev, a)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		if out[i], err = fn(it); err != nil {
			return nil, err
		}
	}
	return generator(out), nil
}

func mapFunc(ev *evaluator, a *args) (func(any) (any, error), error) {
	if attr, ok := a.get(-1, "attribute"); ok {
		get := attrGetter(attr)
		def, hasDef := a.get(-1, "default")
		return func(it any) (any, error) {
			x, err := get(it)
			if _, isU := x.(*Undefined); isU && hasDef {
				return def, err
			}
			return x, err
		}, nil
	}
	if len(a.pos) == 0 {
		return nil, typeErr("map requires a filter argument")
	}
	name, _ := a.pos[0].(string)
	fn, ok := filters[name]
	if !ok {
		return nil, typeErr("No filter named %s.", pyRepr(a.pos[0]))
	}
	rest := &args{pos: a.pos[1:], names: a.names, kw: a.kw}
	return func(it any) (any, error) { return fn(ev, it, rest) }, nil
}

func fSelect(keep, byAttr bool) filterFn {
	return func(ev *evaluator, v any, a *args) (any, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		get, pos := attrGetter(nil), a.pos
		if byAttr {
			if len(pos) == 0 {
				return nil, typeErr("Missing parameter for attribute name")
			}
			get, pos = attrGetter(pos[0]), pos[1:]
		}
		test := func(x any) (bool, error) { return truthy(x), nil }
		if len(pos) > 0 {
			name, _ := pos[0].(string)
			fn, ok := tests[name]
			if !ok {
				return nil, typeErr("No test named %s.", pyRepr(pos[0]))
			}
			rest := &args{pos: pos[1:], names: a.names, kw: a.kw}
			test = func(x any) (bool, error) { return fn(ev, x, rest) }
		}
		var out []any
		for _, it := range items {
			x, err := get(it)
			if err != nil {
				return nil, err
			}
			ok, err := test(x)
			if err != nil {
				return nil, err
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return generator(out), nil
	}
}

func fMinMax(isMin bool) filterFn {
	return func(_ *evaluator, v any, a *args) (any, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return &Undefined{"No aggregated item, sequence was empty."}, nil
		}
		get, cs := attrGetter(a.or(1, "attribute", nil)), truthy(a.or(0, "case_sensitive", false))
		best, bestK := items[0], any(nil)
		for i, it := range items {
			k, err := get(it)
			if err != nil {
				return nil, err
			}
			k = sortKey(k, cs)
			if i == 0 {
				bestK = k
				continue
			}
			a, b := k, bestK
			if !isMin {
				a, b = b, a
			}
			if lt, err := pyLess(a, b, "<"); err != nil {
				return nil, err
			} else if lt {
				best, bestK = it, k
			}
		}
		return best, nil
	}
}

func fReplace(_ *evaluator, v any, a *args) (any, error) {
	s := softStr(v)
	n, err := intArg(a, 2, "count", -1)
	if err != nil {
		return nil, err
	}
	out := strings.Replace(s, softStr(a.or(0, "old", "")), softStr(a.or(1, "new", "")), int(n))
	if len(out) > maxOutput {
		return nil, errTooBig
	}
	return out, nil
}

func fReverse(_ *evaluator, v any, _ *args) (any, error) {
	if s, ok := v.(string); ok {
		r := []rune(s)
		slices.Reverse(r)
		return string(r), nil
	}
	if err := undefErr(v); err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, typeErr("argument to reversed() must be a sequence")
	}
	out := append([]any{}, items...)
	slices.Reverse(out)
	return generator(out), nil
}

func fRound(_ *evaluator, v any, a *args) (any, error) {
	if err := undefErr(v); err != nil {
		return nil, err
	}
	p, err := intArg(a, 0, "precision", 0)
	if err != nil {
		return nil, err
	}
	method := a.or(1, "method", "common")
	if method != "common" && method != "floor" && method != "ceil" {
		return nil, typeErr("method must be common, ceil or floor")
	}
	if _, _, isF, ok := num(v); !ok {
		return nil, typeErr("type %s doesn't define __round__ method", typeName(v))
	} else if !isF && method == "common" {
		return v, nil
	}
	f := toFloat(v)
	if method == "common" {
		if p < 0 || p > 300 {
			return nil, typeErr("vigil's template engine rounds to 0-300 digits")
		}
		r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(p), 64), 64)
		return r, nil
	}
	m := math.Pow(10, float64(p))
	if method == "floor" {
		return math.Floor(f*m) / m, nil
	}
	return math.Ceil(f*m) / m, nil
}

func fSum(_ *evaluator, v any, a *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get := attrGetter(a.or(0, "attribute", nil))
	total := a.or(1, "start", int64(0))
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		if total, err = binop("+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// jinjaTitle is jinja2's title filter: each piece after -, space or an
// opening bracket gets its first character upper, the rest lower.
func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		sep := r == '-' || isPySpace(r) || strings.ContainsRune("({[<", r)
		switch {
		case sep:
			b.WriteRune(r)
		case start:
			b.WriteString(pyUpper(string(r)))
		default:
			b.WriteString(pyLower(string(r)))
		}
		start = sep
	}
	return b.String()
}

func fTrim(_ *evaluator, v any, a *args) (any, error) {
	return pyStrip(softStr(v), a.or(0, "chars", nil), true, true)
}

func fTruncate(_ *evaluator, v any, a *args) (any, error) {
	s := []rune(softStr(v))
	length, err := intArg(a, 0, "length", 255)
	if err != nil {
		return nil, err
	}
	end := []rune(softStr(a.or(2, "end", "...")))
	leeway, err := intArg(a, 3, "leeway", 5)
	if err != nil {
		return nil, err
	}
	if length < int64(len(end)) {
		return nil, typeErr("expected length >= %d, got %d", len(end), length)
	}
	if leeway < 0 {
		return nil, typeErr("expected leeway >= 0, got %d", leeway)
	}
	if int64(len(s)) <= length+leeway {
		return string(s), nil
	}
	cut := string(s[:length-int64(len(end))])
	if !truthy(a.or(1, "killwords", false)) {
		if i := strings.LastIndex(cut, " "); i >= 0 {
			cut = cut[:i]
		}
	}
	return cut + string(end), nil
}

func fUnique(_ *evaluator, v any, a *args) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get, cs := attrGetter(a.or(1, "attribute", nil)), truthy(a.or(0, "case_sensitive", false))
	seen := NewDict()
	var out []any
	for _, it := range items {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		k = sortKey(k, cs)
		if _, ok := seen.Get(k); ok {
			continue
		}
		if err := seen.Set(k, true); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return generator(out), nil
}

func fWordcount(_ *evaluator, v any, _ *args) (any, error) {
	n, in := int64(0), false
	for _, r := range softStr(v) {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n, nil
}
