package jinja

import (
	"fmt"
	"math"
	"strings"
)

// num returns v as a number: ok is false for non-numbers.
func num(v any) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		return int64(boolInt(x)), 0, false, true
	case int64:
		return x, 0, false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

func toFloat(v any) float64 {
	i, f, isF, _ := num(v)
	if isF {
		return f
	}
	return float64(i)
}

// pyEqual is Python's ==.
func pyEqual(a, b any) bool {
	ai, af, aF, aok := num(a)
	bi, bf, bF, bok := num(b)
	if aok && bok {
		if !aF && !bF {
			return ai == bi
		}
		return toFloat(a) == toFloat(b) || (aF && bF && af == bf)
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && seqEqual(x, y)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && seqEqual(x, y)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for i, k := range x.keys {
			if v, ok := y.Get(k); !ok || !pyEqual(x.vals[i], v) {
				return false
			}
		}
		return true
	}
	return a == b
}

func seqEqual(x, y []any) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !pyEqual(x[i], y[i]) {
			return false
		}
	}
	return true
}

// pyLess is Python's <, raising TypeError across types.
func pyLess(a, b any, op string) (bool, error) {
	if _, _, _, ok := num(a); ok {
		if _, _, _, ok := num(b); ok {
			return toFloat(a) < toFloat(b) || exactLess(a, b), nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x < y, nil
		}
	case []any:
		if y, ok := b.([]any); ok {
			return seqLess(x, y, op)
		}
	case Tuple:
		if y, ok := b.(Tuple); ok {
			return seqLess(x, y, op)
		}
	}
	return false, typeErr("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

// exactLess compares two ints beyond float precision.
func exactLess(a, b any) bool {
	ai, _, aF, _ := num(a)
	bi, _, bF, _ := num(b)
	return !aF && !bF && ai < bi
}

func seqLess(x, y []any, op string) (bool, error) {
	for i := 0; i < len(x) && i < len(y); i++ {
		if !pyEqual(x[i], y[i]) {
			return pyLess(x[i], y[i], op)
		}
	}
	return len(x) < len(y), nil
}

func typeErr(format string, a ...any) error {
	return &Error{Msg: fmt.Sprintf(format, a...)}
}

func compareOp(op string, a, b any) (any, error) {
	if u, ok := a.(*Undefined); ok && op != "==" && op != "!=" {
		return nil, u.err()
	}
	if u, ok := b.(*Undefined); ok && op != "==" && op != "!=" && op != "in" && op != "notin" {
		return nil, u.err()
	}
	switch op {
	case "==":
		return pyEqual(a, b), nil
	case "!=":
		return !pyEqual(a, b), nil
	case "<":
		return pyLess(a, b, op)
	case ">":
		return pyLess(b, a, op)
	case "<=":
		lt, err := pyLess(a, b, op)
		return lt || err == nil && pyEqual(a, b), err
	case ">=":
		lt, err := pyLess(b, a, op)
		return lt || err == nil && pyEqual(a, b), err
	case "in":
		return contains(b, a)
	case "notin":
		in, err := contains(b, a)
		return !in, err
	}
	return nil, typeErr("unknown operator %s", op)
}

// contains is Python's "x in c".
func contains(c, x any) (bool, error) {
	switch v := c.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			if u, isU := x.(*Undefined); isU {
				return false, u.err()
			}
			return false, typeErr("'in <string>' requires string as left operand, not %s", typeName(x))
		}
		return strings.Contains(v, s), nil
	case *Dict:
		_, ok := v.Get(x)
		return ok, nil
	case *Undefined:
		return false, v.err()
	}
	items, err := iterate(c)
	if err != nil {
		return false, typeErr("argument of type '%s' is not iterable", typeName(c))
	}
	for _, e := range items {
		if pyEqual(e, x) {
			return true, nil
		}
	}
	return false, nil
}

func (u *Undefined) err() error { return &Error{Msg: u.msg, undefined: true} }

func unsupported(op string, a, b any) error {
	return typeErr("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

func checkInt(v float64) (int64, error) {
	if v >= 9.223372036854775807e18 || v < -9.223372036854775808e18 {
		return 0, typeErr("integer overflow: vigil's template engine holds integers in 64 bits")
	}
	return int64(v), nil
}

var errOverflow = typeErr("integer overflow: vigil's template engine holds integers in 64 bits")

func addInt(a, b int64) (int64, error) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, errOverflow
	}
	return c, nil
}

func mulInt(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, errOverflow
	}
	return c, nil
}
