package jinja

import (
	"math"
	"strings"
)

func binop(op string, a, b any) (any, error) {
	if u, ok := a.(*Undefined); ok {
		return nil, u.err()
	}
	if u, ok := b.(*Undefined); ok && !(op == "%" && isStr(a)) {
		return nil, u.err()
	}
	ai, _, aF, aok := num(a)
	bi, _, bF, bok := num(b)
	if aok && bok {
		if !aF && !bF {
			return intOp(op, ai, bi)
		}
		return floatOp(op, toFloat(a), toFloat(b))
	}
	switch op {
	case "+":
		return addSeq(a, b)
	case "*":
		return mulSeq(a, b)
	case "%":
		if s, ok := a.(string); ok {
			return percentFormat(s, b)
		}
	}
	return nil, unsupported(op, a, b)
}

func isStr(v any) bool { _, ok := v.(string); return ok }

func addSeq(a, b any) (any, error) {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x + y, nil
		}
		return nil, typeErr("can only concatenate str (not \"%s\") to str", typeName(b))
	case []any:
		if y, ok := b.([]any); ok {
			return append(append([]any{}, x...), y...), nil
		}
		return nil, typeErr("can only concatenate list (not \"%s\") to list", typeName(b))
	case Tuple:
		if y, ok := b.(Tuple); ok {
			return append(append(Tuple{}, x...), y...), nil
		}
		return nil, typeErr("can only concatenate tuple (not \"%s\") to tuple", typeName(b))
	}
	return nil, unsupported("+", a, b)
}

func mulSeq(a, b any) (any, error) {
	n, _, isF, ok := num(b)
	if !ok || isF {
		if n2, _, isF2, ok2 := num(a); ok2 && !isF2 {
			return mulSeqN(b, n2, a)
		}
		if _, _, _, ok := num(a); !ok && isF {
			return nil, typeErr("can't multiply sequence by non-int of type 'float'")
		}
		return nil, unsupported("*", a, b)
	}
	return mulSeqN(a, n, b)
}

func mulSeqN(seq any, n int64, other any) (any, error) {
	if n < 0 {
		n = 0
	}
	switch x := seq.(type) {
	case string:
		if len(x) > 0 && n > maxOutput/int64(len(x)) {
			return nil, errTooBig
		}
		return strings.Repeat(x, int(n)), nil
	case []any:
		if len(x) > 0 && n > maxItems/int64(len(x)) {
			return nil, errTooBig
		}
		var out []any
		for range n {
			out = append(out, x...)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	return nil, unsupported("*", seq, other)
}

func intOp(op string, a, b int64) (any, error) {
	switch op {
	case "+":
		return addInt(a, b)
	case "-":
		if b == math.MinInt64 {
			return nil, errOverflow
		}
		return addInt(a, -b)
	case "*":
		return mulInt(a, b)
	case "/":
		if b == 0 {
			return nil, typeErr("division by zero")
		}
		return float64(a) / float64(b), nil
	case "//", "%":
		if b == 0 {
			return nil, typeErr("integer division or modulo by zero")
		}
		q, r := a/b, a%b
		if r != 0 && (r < 0) != (b < 0) {
			q--
			r += b
		}
		if op == "//" {
			return q, nil
		}
		return r, nil
	case "**":
		return intPow(a, b)
	}
	return nil, unsupported(op, a, b)
}

func intPow(a, b int64) (any, error) {
	if b < 0 {
		if a == 0 {
			return nil, typeErr("0.0 cannot be raised to a negative power")
		}
		return math.Pow(float64(a), float64(b)), nil
	}
	switch a {
	case 0, 1:
		if b == 0 {
			return int64(1), nil
		}
		return a, nil
	case -1:
		return int64(1 - 2*(b%2)), nil
	}
	r := int64(1)
	for range b {
		var err error
		if r, err = mulInt(r, a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func floatOp(op string, a, b float64) (any, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, typeErr("float division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, typeErr("float floor division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, typeErr("float modulo")
		}
		r := math.Mod(a, b)
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return r, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, typeErr("0.0 cannot be raised to a negative power")
		}
		return floatPow(a, b)
	}
	return nil, unsupported(op, a, b)
}

// floatPow is Python's float **: a complex result is refused, an
// overflow raises.
func floatPow(a, b float64) (any, error) {
	if a < 0 && b != math.Trunc(b) && !math.IsInf(b, 0) {
		return nil, typeErr("vigil's template engine does not compute complex numbers (a negative number to a fractional power)")
	}
	r := math.Pow(a, b)
	if math.IsInf(r, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
		return nil, typeErr("(34, 'Numerical result out of range')")
	}
	return r, nil
}
