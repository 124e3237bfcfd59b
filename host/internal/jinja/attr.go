package jinja

import (
	"fmt"
	"strings"
)

var strMethods = map[string]bool{"strip": true, "lstrip": true, "rstrip": true, "split": true, "startswith": true,
	"endswith": true, "upper": true, "lower": true, "replace": true, "join": true, "find": true, "count": true,
	"title": true, "capitalize": true, "removeprefix": true, "removesuffix": true, "isdigit": true, "isspace": true}

var dictMethods = map[string]bool{"items": true, "keys": true, "values": true, "get": true}

var listMethods = map[string]bool{"index": true, "count": true}

// pyOnly are Python's other methods of str, dict and list: calling one
// is refused by name (Python would call it), printing one too.
var pyOnly = map[string]bool{"casefold": true, "center": true, "encode": true, "expandtabs": true,
	"format": true, "format_map": true, "index": true, "isalnum": true, "isalpha": true, "isascii": true,
	"isdecimal": true, "isidentifier": true, "islower": true, "isnumeric": true, "isprintable": true,
	"istitle": true, "isupper": true, "ljust": true, "maketrans": true, "partition": true, "rfind": true,
	"rindex": true, "rjust": true, "rpartition": true, "rsplit": true, "splitlines": true, "swapcase": true,
	"translate": true, "zfill": true, "copy": true, "fromkeys": true}

var mutators = map[string]bool{"append": true, "extend": true, "insert": true, "pop": true, "remove": true,
	"reverse": true, "sort": true, "clear": true, "update": true, "setdefault": true, "popitem": true, "add": true, "discard": true}

func unsafeAttr(obj any, name string) *Undefined {
	return &Undefined{fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe.", name, typeName(obj))}
}

// getAttr is jinja2's sandboxed getattr: the attribute, else the item.
func getAttr(obj any, name string) (any, error) {
	if strings.HasPrefix(name, "_") {
		return unsafeAttr(obj, name), nil
	}
	switch o := obj.(type) {
	case *Undefined:
		return nil, o.err()
	case string:
		if strMethods[name] || pyOnly[name] {
			return &method{recv: o, name: name}, nil
		}
	case *Dict:
		if dictMethods[name] {
			return &method{recv: o, name: name}, nil
		}
		if mutators[name] {
			return unsafeAttr(obj, name), nil
		}
		if name == "copy" || name == "fromkeys" {
			return &method{recv: o, name: name}, nil
		}
		if v, ok := o.Get(name); ok {
			return v, nil
		}
	case []any:
		if listMethods[name] || name == "copy" {
			return &method{recv: o, name: name}, nil
		}
		if mutators[name] {
			return unsafeAttr(obj, name), nil
		}
	case *Namespace:
		if v, ok := o.d.Get(name); ok {
			return v, nil
		}
		return &Undefined{fmt.Sprintf("'jinja2.utils.Namespace object' has no attribute '%s'", name)}, nil
	case attrer:
		return o.attr(name), nil
	case int64, float64:
		if v, ok := numAttr(o, name); ok {
			return v, nil
		}
	}
	return undefAttr(obj, name), nil
}

func (ev *evaluator) getitem(x *getitem, f *frame) (any, error) {
	obj, err := ev.eval(x.obj, f)
	if err != nil {
		return nil, err
	}
	if u, ok := obj.(*Undefined); ok {
		return nil, u.err()
	}
	if s, ok := x.key.(*sliceExpr); ok {
		return ev.slice(obj, s, f)
	}
	k, err := ev.eval(x.key, f)
	if err != nil {
		return nil, err
	}
	return getItem(obj, k)
}

func getItem(obj, k any) (any, error) {
	switch o := obj.(type) {
	case *Dict:
		if v, ok := o.Get(k); ok {
			return v, nil
		}
	case []any, Tuple, string:
		if i, _, isF, ok := num(k); ok && !isF {
			items, _ := iterate(o)
			if i < 0 {
				i += int64(len(items))
			}
			if i >= 0 && i < int64(len(items)) {
				return items[i], nil
			}
		}
	}
	if s, ok := k.(string); ok {
		return getAttr(obj, s)
	}
	return undefAttr(obj, k), nil
}

func (ev *evaluator) slice(obj any, s *sliceExpr, f *frame) (any, error) {
	var parts [3]any
	for i, e := range []expr{s.start, s.stop, s.step} {
		if e != nil {
			v, err := ev.eval(e, f)
			if err != nil {
				return nil, err
			}
			parts[i] = v
		}
	}
	items, err := iterate(obj)
	if err != nil || isDictOrNil(obj) {
		return nil, typeErr("'%s' object is not subscriptable", typeName(obj))
	}
	out, err := sliceItems(items, parts)
	if err != nil {
		return nil, err
	}
	switch obj.(type) {
	case string:
		var b strings.Builder
		for _, c := range out {
			b.WriteString(c.(string))
		}
		return b.String(), nil
	case Tuple:
		return Tuple(out), nil
	}
	return out, nil
}

func isDictOrNil(v any) bool {
	_, ok := v.(*Dict)
	return ok
}

func sliceIndex(v any, def int64) (int64, error) {
	if v == nil {
		return def, nil
	}
	i, _, isF, ok := num(v)
	if !ok || isF {
		return 0, typeErr("slice indices must be integers or None or have an __index__ method")
	}
	return i, nil
}

func sliceItems(items []any, p [3]any) ([]any, error) {
	n := int64(len(items))
	step, err := sliceIndex(p[2], 1)
	if err != nil || step == 0 {
		if err == nil {
			err = typeErr("slice step cannot be zero")
		}
		return nil, err
	}
	lo, hi := int64(0), n
	if step < 0 {
		lo, hi = n-1, -1
	}
	start, err := sliceIndex(p[0], lo)
	if err != nil {
		return nil, err
	}
	stop, err := sliceIndex(p[1], hi)
	if err != nil {
		return nil, err
	}
	clamp := func(i int64, given bool) int64 {
		if !given {
			return i
		}
		if i < 0 {
			i += n
		}
		if step > 0 {
			return max(0, min(i, n))
		}
		return max(-1, min(i, n-1))
	}
	start, stop = clamp(start, p[0] != nil), clamp(stop, p[1] != nil)
	out := []any{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		out = append(out, items[i])
	}
	return out, nil
}

// numAttr is int's and float's real, imag, numerator and denominator.
func numAttr(v any, name string) (any, bool) {
	_, isF := v.(float64)
	switch name {
	case "real":
		return v, true
	case "imag":
		if isF {
			return 0.0, true
		}
		return int64(0), true
	case "numerator":
		return v, !isF
	case "denominator":
		return int64(1), !isF
	}
	return nil, false
}
