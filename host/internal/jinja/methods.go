package jinja

import (
	"strings"
	"unicode"
)

// callMethod calls the str, dict and list methods getAttr allows.
func callMethod(recv any, name string, a *args) (any, error) {
	if pyOnly[name] && !(name == "index" && isList(recv)) {
		return nil, typeErr("vigil's template engine does not implement the method .%s() of %s", name, typeName(recv))
	}
	switch r := recv.(type) {
	case string:
		return strMethod(r, name, a)
	case *Dict:
		return dictMethod(r, name, a)
	case []any:
		return listMethod(r, name, a)
	}
	return nil, typeErr("'%s' object has no method '%s'", typeName(recv), name)
}

func strArg(a *args, i int, name string) (string, error) {
	v, ok := a.get(i, name)
	if !ok {
		return "", typeErr("%s() takes at least %d argument(s)", name, i+1)
	}
	s, ok := v.(string)
	if !ok {
		return "", typeErr("must be str, not %s", typeName(v))
	}
	return s, nil
}

func strMethod(s, name string, a *args) (any, error) {
	switch name {
	case "strip", "lstrip", "rstrip":
		return pyStrip(s, a.or(0, "chars", nil), name != "rstrip", name != "lstrip")
	case "upper":
		return pyUpper(s), nil
	case "lower":
		return pyLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "isdigit":
		return s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) }) < 0, nil
	case "isspace":
		return s != "" && strings.IndexFunc(s, func(r rune) bool { return !isPySpace(r) }) < 0, nil
	case "split":
		return pySplit(s, a)
	case "startswith", "endswith":
		return affix(s, name == "startswith", a)
	}
	return strMethod2(s, name, a)
}

func strMethod2(s, name string, a *args) (any, error) {
	if name == "join" {
		it, ok := a.get(0, "iterable")
		if !ok {
			return nil, typeErr("str.join() takes exactly one argument (0 given)")
		}
		return joinItems(s, it)
	}
	sub, err := strArg(a, 0, name)
	if err != nil {
		return nil, err
	}
	switch name {
	case "find":
		i := strings.Index(s, sub)
		if i < 0 {
			return int64(-1), nil
		}
		return int64(runeLen(s[:i])), nil
	case "count":
		return int64(strings.Count(s, sub)), nil
	case "removeprefix":
		return strings.TrimPrefix(s, sub), nil
	case "removesuffix":
		return strings.TrimSuffix(s, sub), nil
	case "replace":
		repl, err := strArg(a, 1, name)
		if err != nil {
			return nil, err
		}
		n := a.or(2, "count", int64(-1))
		c, _, isF, ok := num(n)
		if !ok || isF {
			return nil, typeErr("'%s' object cannot be interpreted as an integer", typeName(n))
		}
		return strings.Replace(s, sub, repl, int(c)), nil
	}
	return nil, typeErr("'str' object has no method '%s'", name)
}

func joinItems(sep string, v any) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, typeErr("can only join an iterable")
	}
	parts := make([]string, len(items))
	for i, e := range items {
		s, ok := e.(string)
		if !ok {
			return nil, typeErr("sequence item %d: expected str instance, %s found", i, typeName(e))
		}
		parts[i] = s
	}
	return strings.Join(parts, sep), nil
}

// pyTitle is str.title: a cased character after an uncased one is title
// cased, the others lowered.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		cased := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		if prevCased {
			b.WriteString(pyLower(string(r)))
		} else {
			b.WriteString(titleRune(r))
		}
		prevCased = cased
	}
	return b.String()
}

func pySplit(s string, a *args) (any, error) {
	sep := a.or(0, "sep", nil)
	mv := a.or(1, "maxsplit", int64(-1))
	m, _, isF, ok := num(mv)
	if !ok || isF {
		return nil, typeErr("'%s' object cannot be interpreted as an integer", typeName(mv))
	}
	var parts []string
	switch sp := sep.(type) {
	case nil:
		parts = splitSpace(s, m)
	case string:
		if sp == "" {
			return nil, typeErr("empty separator")
		}
		n := -1
		if m >= 0 {
			n = int(m) + 1
		}
		parts = strings.SplitN(s, sp, n)
	default:
		return nil, typeErr("must be str or None, not %s", typeName(sep))
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// splitSpace is str.split() with no separator: runs of whitespace.
func splitSpace(s string, maxsplit int64) []string {
	parts := []string{}
	for {
		s = strings.TrimLeftFunc(s, isPySpace)
		if s == "" {
			return parts
		}
		if maxsplit >= 0 && int64(len(parts)) == maxsplit {
			return append(parts, strings.TrimRightFunc(s, isPySpace))
		}
		i := strings.IndexFunc(s, isPySpace)
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
}

func affix(s string, prefix bool, a *args) (any, error) {
	v, _ := a.get(0, "prefix")
	var cands []any
	switch x := v.(type) {
	case string:
		cands = []any{x}
	case Tuple:
		cands = x
	default:
		return nil, typeErr("startswith first arg must be str or a tuple of str, not %s", typeName(v))
	}
	for _, c := range cands {
		cs, ok := c.(string)
		if !ok {
			return nil, typeErr("tuple for startswith must only contain str, not %s", typeName(c))
		}
		if prefix && strings.HasPrefix(s, cs) || !prefix && strings.HasSuffix(s, cs) {
			return true, nil
		}
	}
	return false, nil
}

func dictMethod(d *Dict, name string, a *args) (any, error) {
	switch name {
	case "keys":
		return view("dict_keys", append([]any{}, d.keys...)), nil
	case "values":
		return view("dict_values", append([]any{}, d.vals...)), nil
	case "items":
		return view("dict_items", dictItems(d)), nil
	case "get":
		k, ok := a.get(0, "key")
		if !ok {
			return nil, typeErr("get expected at least 1 argument, got 0")
		}
		if _, err := hashKey(k); err != nil {
			return nil, err
		}
		if v, ok := d.Get(k); ok {
			return v, nil
		}
		return a.or(1, "default", nil), nil
	}
	return nil, typeErr("'dict' object has no method '%s'", name)
}

func dictItems(d *Dict) []any {
	out := make([]any, d.Len())
	for i, k := range d.keys {
		out[i] = Tuple{k, d.vals[i]}
	}
	return out
}

func listMethod(l []any, name string, a *args) (any, error) {
	x, ok := a.get(0, "value")
	if !ok {
		return nil, typeErr("%s() takes exactly one argument (0 given)", name)
	}
	n := int64(0)
	for i, e := range l {
		if pyEqual(e, x) {
			if name == "index" {
				return int64(i), nil
			}
			n++
		}
	}
	if name == "index" {
		return nil, typeErr("%s is not in list", pyRepr(x))
	}
	return n, nil
}

func isList(v any) bool { _, ok := v.([]any); return ok }
