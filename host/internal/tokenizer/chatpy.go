package tokenizer

import (
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// Python's operators and jinja2's tests, which checkTemplate puts in
// place of the library's (its arithmetic treats None, undefined and
// mismatched types as 0, its "in" and "==" compare 1 and 1.0 or True
// as different, its tests disagree on undefined values and strings).

func callBinop(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	return pyBinop(args[2].AsString(), args[0], args[1])
}

func pyBinop(op string, a, b jinja.Value) (jinja.Value, error) {
	switch op {
	case "==":
		return jinja.NewBool(pyEqual(a, b)), nil
	case "!=":
		return jinja.NewBool(!pyEqual(a, b)), nil
	case "in", "not in":
		in, err := pyContains(b, a)
		return jinja.NewBool(in == (op == "in")), err
	}
	if op == "%" && a.IsString() { // str(undefined) is ""
		if b.IsList() || b.IsDict() {
			return jinja.Value{}, fmt.Errorf(`"%%" formatting with a list, tuple or dict is not supported`)
		}
		s, err := pyPercent(a.AsString(), []jinja.Value{b})
		return jinja.NewString(s), err
	}
	if a.IsUndefined() || b.IsUndefined() {
		return jinja.Value{}, fmt.Errorf("an undefined value used with %q (Python's Jinja raises UndefinedError)", op)
	}
	switch op {
	case "<", ">", "<=", ">=":
		return pyCompare(op, a, b)
	case "+":
		if a.IsString() && b.IsString() {
			return jinja.NewString(a.AsString() + b.AsString()), nil
		}
		if a.IsList() && b.IsList() {
			return jinja.NewList(append(append([]jinja.Value{}, a.AsList().Items...), b.AsList().Items...)), nil
		}
	case "*":
		if s, ok := repeat(a, b); ok {
			return s, nil
		}
	}
	if !isNum(a) || !isNum(b) {
		return jinja.Value{}, fmt.Errorf("unsupported operand types for %s: %s and %s", op, pyTypeName(a), pyTypeName(b))
	}
	return pyArith(op, a, b)
}

func isNum(v jinja.Value) bool { return v.IsInt() || v.IsFloat() || v.IsBool() }

func pyTypeName(v jinja.Value) string {
	switch {
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	case v.IsUndefined():
		return "Undefined"
	}
	return pyType(v)
}

func asInt(v jinja.Value) int64 {
	if v.IsBool() {
		if v.AsBool() {
			return 1
		}
		return 0
	}
	return v.AsInt()
}

func asFloat(v jinja.Value) float64 {
	if v.IsFloat() {
		return v.AsFloat()
	}
	return float64(asInt(v))
}

// repeat is str * int and list * int (either order).
func repeat(a, b jinja.Value) (jinja.Value, bool) {
	if a.IsInt() || a.IsBool() {
		a, b = b, a
	}
	if !(b.IsInt() || b.IsBool()) {
		return jinja.Value{}, false
	}
	n := max(0, int(asInt(b)))
	switch {
	case a.IsString():
		return jinja.NewString(strings.Repeat(a.AsString(), n)), true
	case a.IsList():
		var items []jinja.Value
		for range n {
			items = append(items, a.AsList().Items...)
		}
		return jinja.NewList(items), true
	}
	return jinja.Value{}, false
}

func pyArith(op string, a, b jinja.Value) (jinja.Value, error) {
	if a.IsFloat() || b.IsFloat() || op == "/" || (op == "**" && asInt(b) < 0) {
		return floatArith(op, asFloat(a), asFloat(b))
	}
	x, y := asInt(a), asInt(b)
	switch op {
	case "+":
		return jinja.NewInt(x + y), nil
	case "-":
		return jinja.NewInt(x - y), nil
	case "*":
		return jinja.NewInt(x * y), nil
	case "**":
		r := math.Pow(float64(x), float64(y))
		if math.Abs(r) >= 1<<53 {
			return jinja.Value{}, fmt.Errorf("integer power too large")
		}
		return jinja.NewInt(int64(r)), nil
	}
	if y == 0 {
		return jinja.Value{}, fmt.Errorf("division by zero")
	}
	q, m := x/y, x%y
	if m != 0 && (m < 0) != (y < 0) {
		q, m = q-1, m+y
	}
	if op == "//" {
		return jinja.NewInt(q), nil
	}
	return jinja.NewInt(m), nil
}

func floatArith(op string, x, y float64) (jinja.Value, error) {
	switch op {
	case "+":
		return jinja.NewFloat(x + y), nil
	case "-":
		return jinja.NewFloat(x - y), nil
	case "*":
		return jinja.NewFloat(x * y), nil
	case "**":
		return jinja.NewFloat(math.Pow(x, y)), nil
	}
	if y == 0 {
		return jinja.Value{}, fmt.Errorf("float division by zero")
	}
	switch op {
	case "/":
		return jinja.NewFloat(x / y), nil
	case "//":
		return jinja.NewFloat(math.Floor(x / y)), nil
	}
	m := math.Mod(x, y)
	if m != 0 && (m < 0) != (y < 0) {
		m += y
	}
	return jinja.NewFloat(m), nil
}

func pyCompare(op string, a, b jinja.Value) (jinja.Value, error) {
	var c int
	switch {
	case isNum(a) && isNum(b):
		x, y := asFloat(a), asFloat(b)
		c = map[bool]int{true: -1, false: 0}[x < y] + map[bool]int{true: 1, false: 0}[x > y]
	case a.IsString() && b.IsString():
		c = strings.Compare(a.AsString(), b.AsString())
	default:
		return jinja.Value{}, fmt.Errorf("%q not supported between %s and %s", op, pyTypeName(a), pyTypeName(b))
	}
	r := map[string]bool{"<": c < 0, ">": c > 0, "<=": c <= 0, ">=": c >= 0}[op]
	return jinja.NewBool(r), nil
}

// pyEqual is Python's == (1 == 1.0 == True; jinja2's undefined equals
// only undefined).
func pyEqual(a, b jinja.Value) bool {
	switch {
	case isNum(a) && isNum(b):
		if a.IsFloat() || b.IsFloat() {
			return asFloat(a) == asFloat(b)
		}
		return asInt(a) == asInt(b)
	case a.IsList() && b.IsList():
		x, y := a.AsList().Items, b.AsList().Items
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case a.IsDict() && b.IsDict():
		x, y := a.AsDict(), b.AsDict()
		if x.Len() != y.Len() {
			return false
		}
		for _, k := range x.Keys {
			v, ok := y.Get(k)
			if !ok || !pyEqual(x.Data[k], v) {
				return false
			}
		}
		return true
	case a.IsCallable() || b.IsCallable():
		return false
	}
	return a.Equals(b)
}

func pyContains(container, item jinja.Value) (bool, error) {
	switch {
	case container.IsUndefined():
		return false, nil
	case container.IsString():
		if !item.IsString() {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", pyTypeName(item))
		}
		return strings.Contains(container.AsString(), item.AsString()), nil
	case container.IsList():
		for _, v := range container.AsList().Items {
			if pyEqual(v, item) {
				return true, nil
			}
		}
		return false, nil
	case container.IsDict():
		return item.IsString() && container.AsDict().Has(item.AsString()), nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", pyTypeName(container))
}

// callTest is f(value, "name", "not" or "", args...).
func callTest(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	r, err := pyTest(args[1].AsString(), args[0], args[3:])
	if args[2].AsString() == "not" {
		r = !r
	}
	return jinja.NewBool(r), err
}

func pyTest(name string, v jinja.Value, args []jinja.Value) (bool, error) {
	switch name {
	case "defined":
		return !v.IsUndefined(), nil
	case "undefined":
		return v.IsUndefined(), nil
	case "none":
		return v.IsNone(), nil
	case "boolean":
		return v.IsBool(), nil
	case "integer":
		return v.IsInt(), nil
	case "float":
		return v.IsFloat(), nil
	case "number":
		return isNum(v), nil
	case "string":
		return v.IsString(), nil
	case "mapping":
		return v.IsDict(), nil
	case "iterable", "sequence":
		return v.IsUndefined() || v.IsString() || v.IsList() || v.IsDict(), nil
	case "callable":
		return v.IsCallable(), nil
	case "true":
		return v.IsBool() && v.AsBool(), nil
	case "false":
		return v.IsBool() && !v.AsBool(), nil
	case "upper", "lower":
		s, err := pyStr(v)
		return pyCased(s, name == "upper"), err
	}
	return pyTestArgs(name, v, args)
}

func pyTestArgs(name string, v jinja.Value, args []jinja.Value) (bool, error) {
	ops := map[string]string{"eq": "==", "equalto": "==", "==": "==", "ne": "!=", "!=": "!=",
		"gt": ">", "greaterthan": ">", ">": ">", "ge": ">=", ">=": ">=", "lt": "<", "lessthan": "<",
		"<": "<", "le": "<=", "<=": "<=", "in": "in"}
	var arg jinja.Value
	switch name {
	case "odd", "even":
		arg = jinja.NewInt(2)
	default:
		if len(args) != 1 {
			return false, fmt.Errorf("the test %q takes one argument", name)
		}
		arg = args[0]
	}
	if op, ok := ops[name]; ok {
		r, err := pyBinop(op, v, arg)
		return err == nil && r.AsBool(), err
	}
	switch name {
	case "odd", "even", "divisibleby":
		r, err := pyBinop("%", v, arg)
		if err != nil {
			return false, err
		}
		return pyEqual(r, jinja.NewInt(map[bool]int64{true: 1, false: 0}[name == "odd"])), nil
	case "sameas":
		if !(v.IsNone() || v.IsBool()) || !(arg.IsNone() || arg.IsBool()) {
			return false, fmt.Errorf("the test sameas is supported for none, true and false only")
		}
		return v.Equals(arg), nil
	}
	return false, fmt.Errorf("the test %q is not supported", name)
}

// pyCased is Python's str.isupper (upper) or str.islower.
func pyCased(s string, upper bool) bool {
	cased := false
	for _, r := range s {
		switch {
		case unicode.IsTitle(r), upper && unicode.IsLower(r), !upper && unicode.IsUpper(r):
			return false
		case unicode.IsUpper(r) || unicode.IsLower(r):
			cased = true
		}
	}
	return cased
}
