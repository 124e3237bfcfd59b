package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// jsonEnc is json.dumps(ensure_ascii=False, indent, separators,
// sort_keys) as transformers' tojson calls it.
type jsonEnc struct {
	b           strings.Builder
	indent      *string
	item, colon string
	sortKeys    bool
	ascii       bool // ensure_ascii: \u escapes beyond printable ASCII
}

func fTojson(_ *evaluator, v any, a *args) (any, error) {
	e := &jsonEnc{item: ", ", colon: ": ", sortKeys: truthy(a.or(3, "sort_keys", false))}
	e.ascii = truthy(a.or(0, "ensure_ascii", false))
	switch ind := a.or(1, "indent", nil).(type) {
	case nil:
	case string:
		e.indent = &ind
	default:
		n, _, isF, ok := num(ind)
		if !ok || isF {
			return nil, typeErr("can't multiply sequence by non-int of type '%s'", typeName(ind))
		}
		s := strings.Repeat(" ", max(0, int(min(n, 1000))))
		e.indent = &s
	}
	if e.indent != nil {
		e.item = ","
	}
	if sep := a.or(2, "separators", nil); sep != nil {
		items, err := iterate(sep)
		if err != nil || len(items) != 2 || !isStr(items[0]) || !isStr(items[1]) {
			return nil, typeErr("vigil's template engine takes tojson's separators as two strings")
		}
		e.item, e.colon = items[0].(string), items[1].(string)
	}
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.b.String(), nil
}

func (e *jsonEnc) newline(depth int) {
	if e.indent != nil {
		e.b.WriteByte('\n')
		for range depth {
			e.b.WriteString(*e.indent)
		}
	}
}

func (e *jsonEnc) value(v any, depth int) error {
	if depth > maxDepth || e.b.Len() > maxOutput {
		return errTooBig
	}
	switch x := v.(type) {
	case nil:
		e.b.WriteString("null")
	case bool:
		e.b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case int64:
		e.b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		e.b.WriteString(jsonFloat(x))
	case string:
		jsonString(&e.b, x, e.ascii)
	case []any:
		return e.seq(x, depth)
	case Tuple:
		return e.seq(x, depth)
	case *Dict:
		return e.dict(x, depth)
	default:
		return typeErr("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return floatRepr(f)
}

func (e *jsonEnc) seq(items []any, depth int) error {
	if len(items) == 0 {
		e.b.WriteString("[]")
		return nil
	}
	e.b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			e.b.WriteString(e.item)
		}
		e.newline(depth + 1)
		if err := e.value(it, depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.b.WriteByte(']')
	return nil
}

func jsonKey(k any) (string, error) {
	switch x := k.(type) {
	case string:
		return x, nil
	case nil, bool, int64:
		return strings.Trim(pyJSONScalar(x), `"`), nil
	case float64:
		return jsonFloat(x), nil
	}
	return "", typeErr("keys must be str, int, float, bool or None, not %s", typeName(k))
}

func pyJSONScalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return map[bool]string{true: "true", false: "false"}[x]
	}
	return fmt.Sprint(v)
}

func (e *jsonEnc) dict(d *Dict, depth int) error {
	if d.Len() == 0 {
		e.b.WriteString("{}")
		return nil
	}
	items := dictItems(d)
	if e.sortKeys {
		var err error
		key := func(it any) (any, error) { return it.(Tuple)[0], nil }
		if items, err = sortItems(items, key, true, false); err != nil {
			return err
		}
	}
	e.b.WriteByte('{')
	for i, it := range items {
		kv := it.(Tuple)
		k, err := jsonKey(kv[0])
		if err != nil {
			return err
		}
		if i > 0 {
			e.b.WriteString(e.item)
		}
		e.newline(depth + 1)
		jsonString(&e.b, k, e.ascii)
		e.b.WriteString(e.colon)
		if err := e.value(kv[1], depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.b.WriteByte('}')
	return nil
}

// jsonString is json.dumps' string; with ascii, every character beyond
// printable ASCII is a \u escape (a surrogate pair above U+FFFF).
func jsonString(b *strings.Builder, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || ascii && r >= 0x7f && r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			case ascii && r >= 0x10000:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
