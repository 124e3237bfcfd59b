package tokenizer

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"github.com/ardanlabs/jinja"
)

// Where the library's values differ from jinja2's, checkTemplate wraps
// the expression in a call to a function vigil gives the render:
//   - an undefined value's attribute, item, slice or arithmetic raises
//     UndefinedError in jinja2 (the library gives undefined, or 0);
//   - looping over None (or a number) raises TypeError in jinja2;
//   - jinja2 prints None as "None", floats and containers as Python's
//     repr (the library prints "", %g, and its own quoting).
const (
	fnDefined  = "vigil defined"
	fnIterable = "vigil iterable"
	fnPrint    = "vigil print"
	fnBinop    = "vigil binop"
	fnTest     = "vigil test"
	fnUnsafe   = "vigil unsafe"
	fnUnary    = "vigil unary "
)

var vigilFuncValues = map[string]jinja.Value{
	fnDefined:     jinja.NewCallable(fnDefined, callDefined),
	fnIterable:    jinja.NewCallable(fnIterable, callIterable),
	fnPrint:       jinja.NewCallable(fnPrint, callPrint),
	fnBinop:       jinja.NewCallable(fnBinop, callBinop),
	fnTest:        jinja.NewCallable(fnTest, callTest),
	fnUnsafe:      jinja.NewCallable(fnUnsafe, callUnsafe),
	fnUnary + "-": jinja.NewCallable(fnUnary+"-", unaryCall("-")),
	fnUnary + "+": jinja.NewCallable(fnUnary+"+", unaryCall("+")),
}

// unaryCall checks the operand of a unary op as Python does: undefined
// raises, a bool counts as an int, anything else but a number raises.
func unaryCall(op string) func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
		v, err := callDefined(args, kw)
		switch {
		case err != nil:
			return v, err
		case v.IsBool():
			return jinja.NewInt(int64(asInt(v))), nil
		case v.IsInt() || v.IsFloat():
			return v, nil
		}
		return jinja.Value{}, fmt.Errorf("bad operand type for unary %s: '%s'", op, pyTypeName(v))
	}
}

func callUnsafe(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	return jinja.Value{}, fmt.Errorf("calling %s() is refused by Python's sandboxed Jinja (it modifies a value, or does not exist)", args[0].AsString())
}

func callDefined(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if args[0].IsUndefined() {
		return jinja.Value{}, fmt.Errorf("%s is undefined (Python's Jinja raises UndefinedError)", args[1].AsString())
	}
	return args[0], nil
}

func callIterable(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v := args[0]
	if v.IsUndefined() || v.IsList() || v.IsDict() || v.IsString() {
		return v, nil
	}
	return jinja.Value{}, fmt.Errorf("%s is not iterable (a %s; Python's Jinja raises TypeError)", args[1].AsString(), pyType(v))
}

func callPrint(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v := args[0]
	switch {
	case v.IsString(), v.IsUndefined():
		return v, nil
	case v.IsCallable():
		return jinja.Value{}, fmt.Errorf("printing a function (%s) is not supported", args[1].AsString())
	}
	s, err := pyRepr(v)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("printing %s: %w", args[1].AsString(), err)
	}
	return jinja.NewString(s), nil
}

func pyType(v jinja.Value) string {
	switch {
	case v.IsNone():
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInt():
		return "int"
	case v.IsFloat():
		return "float"
	}
	return "function"
}

// pyRepr is Python's str() of a value (repr inside containers).
func pyRepr(v jinja.Value) (string, error) {
	switch {
	case v.IsList():
		parts := make([]string, 0, v.AsList().Len())
		for _, it := range v.AsList().Items {
			s, err := pyReprItem(it)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case v.IsDict():
		d := v.AsDict()
		parts := make([]string, 0, d.Len())
		for _, k := range d.OrderedKeys() {
			e, _ := d.Get(k)
			s, err := pyReprItem(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, pyQuote(k)+": "+s)
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	}
	return pyStr(v)
}

func pyReprItem(v jinja.Value) (string, error) {
	switch {
	case v.IsString():
		return pyQuote(v.AsString()), nil
	case v.IsUndefined(), v.IsCallable():
		return "", fmt.Errorf("a container holding an undefined value or a function")
	}
	return pyRepr(v)
}

// pyQuote is Python's repr of a str.
func pyQuote(s string) string {
	q := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteRune(q)
	for _, r := range s {
		switch {
		case r == q || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || (r > 0x7f && unicode.IsPrint(r)) || (r > 0x20 && r < 0x7f):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(q)
	return b.String()
}

// wrap replaces the expression in field (an expr interface of the parsed
// template) by fn(expression, "its description").
func wrap(field reflect.Value, fn string) error {
	if field.Kind() != reflect.Interface || field.IsNil() {
		return nil
	}
	return replaceWithCall(field, fn, field, describe(field))
}

// replaceWithCall sets field to the expression fn(parts...): a part is
// an expression (an expr interface reflect.Value) or a string literal.
func replaceWithCall(field reflect.Value, fn string, parts ...any) error {
	src := make([]string, len(parts))
	for i, p := range parts {
		src[i] = "x"
		if s, ok := p.(string); ok {
			src[i] = strconv.Quote(s)
		}
	}
	probe, err := jinja.Compile("{{ f(" + strings.Join(src, ", ") + ") }}")
	if err != nil {
		return err
	}
	call := reflect.ValueOf(probe).Elem().FieldByName("nodes").Index(0).Elem().Elem().FieldByName("expression")
	c := call.Elem().Elem()
	setString(c.FieldByName("fn").Elem().Elem().FieldByName("name"), fn)
	args := c.FieldByName("args")
	for i, p := range parts {
		if e, ok := p.(reflect.Value); ok {
			unlock(args.Index(i)).Set(unlock(e))
		}
	}
	unlock(field).Set(unlock(call))
	return nil
}

// unlock makes an unexported field of the parsed template settable.
func unlock(f reflect.Value) reflect.Value {
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// setString sets an unexported string field of the parsed template.
func setString(f reflect.Value, s string) { unlock(f).SetString(s) }

// describe names an expression for an error: x, x.y, x[...].
func describe(e reflect.Value) string {
	for e.Kind() == reflect.Interface || e.Kind() == reflect.Pointer {
		if e.IsNil() {
			return "a value"
		}
		e = e.Elem()
	}
	switch e.Type().Name() {
	case "nameExpr":
		return "'" + e.FieldByName("name").String() + "'"
	case "attrExpr":
		return strings.Trim(describe(e.FieldByName("obj")), "'") + "." + e.FieldByName("attr").String()
	case "itemExpr":
		return strings.Trim(describe(e.FieldByName("obj")), "'") + "[...]"
	}
	return "a value"
}
