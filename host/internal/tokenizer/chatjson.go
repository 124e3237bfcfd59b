package tokenizer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// pyJSON is Python's json.dumps with transformers' tojson arguments.
type pyJSON struct {
	asciiOnly bool
	indent    *string // nil: one line
	itemSep   string
	keySep    string
	sortKeys  bool
	b         strings.Builder
}

// filterToJSON is transformers' tojson(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False): json.dumps.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	j := pyJSON{itemSep: ", ", keySep: ": "}
	if v, ok := arg(args, kwargs, 1, "ensure_ascii"); ok {
		j.asciiOnly = v.IsTruthy()
	}
	if v, ok := arg(args, kwargs, 2, "indent"); ok {
		var s string
		switch {
		case v.IsInt():
			s = strings.Repeat(" ", max(0, int(v.AsInt())))
		case v.IsString():
			s = v.AsString()
		default:
			return jinja.Value{}, fmt.Errorf("tojson: indent must be an integer or a string")
		}
		j.indent, j.itemSep = &s, ","
	}
	if v, ok := arg(args, kwargs, 3, "separators"); ok {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Value{}, fmt.Errorf("tojson: separators must be two strings")
		}
		j.itemSep, j.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := arg(args, kwargs, 4, "sort_keys"); ok {
		j.sortKeys = v.IsTruthy()
	}
	if err := j.value(args[0], 0); err != nil {
		return jinja.Value{}, fmt.Errorf("tojson: %w", err)
	}
	return jinja.NewString(j.b.String()), nil
}

func (j *pyJSON) value(v jinja.Value, depth int) error {
	switch {
	case v.IsNone():
		j.b.WriteString("null")
	case v.IsBool():
		j.b.WriteString(map[bool]string{true: "true", false: "false"}[v.AsBool()])
	case v.IsInt():
		j.b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		j.b.WriteString(jsonFloat(v.AsFloat()))
	case v.IsString():
		j.str(v.AsString())
	case v.IsList():
		return j.list(v.AsList().Items, depth)
	case v.IsDict():
		return j.dict(v.AsDict(), depth)
	default:
		return fmt.Errorf("object of type %s is not JSON serializable", map[bool]string{true: "Undefined", false: "function"}[v.IsUndefined()])
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
	return pyFloat(f)
}

// newline writes the line break and indentation before an item at depth.
func (j *pyJSON) newline(depth int) {
	if j.indent != nil {
		j.b.WriteByte('\n')
		j.b.WriteString(strings.Repeat(*j.indent, depth))
	}
}

func (j *pyJSON) list(items []jinja.Value, depth int) error {
	if len(items) == 0 {
		j.b.WriteString("[]")
		return nil
	}
	j.b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			j.b.WriteString(j.itemSep)
		}
		j.newline(depth + 1)
		if err := j.value(it, depth+1); err != nil {
			return err
		}
	}
	j.newline(depth)
	j.b.WriteByte(']')
	return nil
}

func (j *pyJSON) dict(d *jinja.Dict, depth int) error {
	if d.Len() == 0 {
		j.b.WriteString("{}")
		return nil
	}
	keys := d.OrderedKeys() // Python keeps insertion order
	if j.sortKeys {
		sort.Strings(keys)
	}
	j.b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			j.b.WriteString(j.itemSep)
		}
		j.newline(depth + 1)
		j.str(k)
		j.b.WriteString(j.keySep)
		v, _ := d.Get(k)
		if err := j.value(v, depth+1); err != nil {
			return err
		}
	}
	j.newline(depth)
	j.b.WriteByte('}')
	return nil
}

// str writes a JSON string as Python's json module does.
func (j *pyJSON) str(s string) {
	j.b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			j.b.WriteString(`\"`)
		case r == '\\':
			j.b.WriteString(`\\`)
		case r == '\n':
			j.b.WriteString(`\n`)
		case r == '\r':
			j.b.WriteString(`\r`)
		case r == '\t':
			j.b.WriteString(`\t`)
		case r == '\b':
			j.b.WriteString(`\b`)
		case r == '\f':
			j.b.WriteString(`\f`)
		case r < 0x20 || (j.asciiOnly && r >= 0x7f):
			j.escape(r)
		default:
			j.b.WriteRune(r)
		}
	}
	j.b.WriteByte('"')
}

func (j *pyJSON) escape(r rune) {
	if r > 0xffff {
		r -= 0x10000
		fmt.Fprintf(&j.b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		return
	}
	fmt.Fprintf(&j.b, `\u%04x`, r)
}

// filterFormat is jinja2's format filter: value % args, Python's printf
// style, for %s, %d, %i and %%; any other conversion is refused.
func filterFormat(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(kwargs) > 0 {
		return jinja.Value{}, fmt.Errorf("format: keyword arguments are not supported")
	}
	f, err := pyStr(args[0])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("format: %w", err)
	}
	out, err := pyPercent(f, args[1:])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("format: %w", err)
	}
	return jinja.NewString(out), nil
}

func pyPercent(f string, args []jinja.Value) (string, error) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		if i++; i == len(f) {
			return "", fmt.Errorf("incomplete format")
		}
		c := f[i]
		if c == '%' {
			b.WriteByte('%')
			continue
		}
		if n == len(args) {
			return "", fmt.Errorf("not enough arguments for format string")
		}
		s, err := pyConvert(c, args[n])
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		n++
	}
	if n < len(args) {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func pyConvert(c byte, v jinja.Value) (string, error) {
	switch c {
	case 's':
		return pyStr(v)
	case 'd', 'i':
		switch {
		case v.IsInt():
			return strconv.FormatInt(v.AsInt(), 10), nil
		case v.IsBool():
			return map[bool]string{true: "1", false: "0"}[v.AsBool()], nil
		case v.IsFloat() && !math.IsInf(v.AsFloat(), 0) && !math.IsNaN(v.AsFloat()):
			return strconv.FormatInt(int64(v.AsFloat()), 10), nil
		}
		return "", fmt.Errorf("%%%c format: a number is required", c)
	}
	return "", fmt.Errorf("the conversion %%%c is not supported", c)
}
