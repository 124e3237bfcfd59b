package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Values are Go values standing for Python's: nil (None), bool, int64,
// float64, string, []any (list), Tuple, *Dict, *Namespace, *Undefined,
// and the callables (*Macro, *method, builtin).
type Tuple []any

// Dict is a Python dict: insertion order, keys equal as Python's are.
type Dict struct {
	keys []any
	vals []any
	idx  map[any]int
}

func NewDict() *Dict { return &Dict{idx: map[any]int{}} }

func hashKey(k any) (any, error) {
	switch v := k.(type) {
	case bool:
		return int64(boolInt(v)), nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<62 {
			return int64(v), nil
		}
		return v, nil
	case nil, int64, string:
		return v, nil
	case Tuple:
		return "\x00tuple" + pyRepr(v), nil
	}
	return nil, &Error{Msg: fmt.Sprintf("unhashable type: '%s'", typeName(k))}
}

func (d *Dict) Set(k, v any) error {
	h, err := hashKey(k)
	if err != nil {
		return err
	}
	if i, ok := d.idx[h]; ok {
		d.vals[i] = v
		return nil
	}
	d.idx[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

func (d *Dict) Get(k any) (any, bool) {
	h, err := hashKey(k)
	if err != nil {
		return nil, false
	}
	i, ok := d.idx[h]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

func (d *Dict) Len() int { return len(d.keys) }

// Namespace is jinja2's namespace(): attributes set with {% set ns.x %}.
type Namespace struct{ d *Dict }

// Undefined is jinja2's default Undefined: it prints as "", is false and
// empty, and raises on anything else.
type Undefined struct {
	msg string // the UndefinedError's message
}

func undefName(name string) *Undefined { return &Undefined{fmt.Sprintf("'%s' is undefined", name)} }

func undefAttr(obj any, name any) *Undefined {
	return &Undefined{fmt.Sprintf("%s has no attribute %s", pyRepr(objectTypeRepr(obj)), pyRepr(name))}
}

func objectTypeRepr(obj any) string {
	if obj == nil {
		return "None"
	}
	return typeName(obj) + " object"
}

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case *Undefined:
		return "Undefined"
	case *Macro:
		return "Macro"
	case *loopObj:
		return "LoopContext"
	case *method, builtin:
		return "builtin_function_or_method"
	case *Gen:
		if x.kind != "" {
			return x.kind
		}
		return "generator"
	}
	return fmt.Sprintf("%T", v)
}

// pyStr is Python's str().
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *Undefined:
		return ""
	}
	return pyRepr(v)
}

// pyRepr is Python's repr().
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > 200 {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[x])
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(floatRepr(x))
	case string:
		strRepr(b, x)
	case []any:
		writeSeq(b, x, "[", "]", depth)
	case Tuple:
		if len(x) == 1 {
			b.WriteString("(")
			writeRepr(b, x[0], depth+1)
			b.WriteString(",)")
			return
		}
		writeSeq(b, x, "(", ")", depth)
	case *Dict:
		writeDict(b, x, depth)
	case *Namespace:
		b.WriteString("<Namespace ")
		writeDict(b, x.d, depth)
		b.WriteString(">")
	case *Undefined:
		b.WriteString("Undefined")
	case *Macro:
		b.WriteString("<Macro '" + x.name + "'>")
	case *Gen:
		if x.repr == "" {
			b.WriteString("<generator object>")
		}
		b.WriteString(x.repr)
	default:
		fmt.Fprintf(b, "<%s object>", typeName(v))
	}
}

func writeSeq(b *strings.Builder, items []any, open, close string, depth int) {
	b.WriteString(open)
	for i, e := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, e, depth+1)
	}
	b.WriteString(close)
}

func writeDict(b *strings.Builder, d *Dict, depth int) {
	b.WriteString("{")
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, k, depth+1)
		b.WriteString(": ")
		writeRepr(b, d.vals[i], depth+1)
	}
	b.WriteString("}")
}

// floatRepr is Python's repr of a float: the shortest round-trip digits,
// positional for exponents from -4 to 15, with ".0" on integers.
func floatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exps, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(exps)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(out, ".") {
		out += ".0"
	}
	return out
}

func strRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString("\\n")
		case r == '\r':
			b.WriteString("\\r")
		case r == '\t':
			b.WriteString("\\t")
		case r == ' ' || unicode.IsPrint(r) && r != 0xad:
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, "\\x%02x", r)
		case r < 0x10000:
			fmt.Fprintf(b, "\\u%04x", r)
		default:
			fmt.Fprintf(b, "\\U%08x", r)
		}
	}
	b.WriteByte(q)
}

// truthy is Python's bool().
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, *Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}
