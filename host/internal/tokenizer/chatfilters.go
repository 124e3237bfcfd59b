package tokenizer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

type filterFunc = func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error)

// vigilFilters are the filters vigil renders itself, as transformers'
// environment does: tojson is transformers' json.dumps(ensure_ascii=False)
// (the library's escapes <>& and sorts keys with indent), trim is
// Python's str.strip (the library keeps U+001C-U+001F), and format and
// truncate are jinja2's, which the library lacks.
var vigilFilters = map[string]filterFunc{
	"tojson":     filterToJSON,
	"trim":       filterTrim,
	"format":     filterFormat,
	"truncate":   filterTruncate,
	"first":      filterFirst,
	"last":       filterLast,
	"abs":        filterAbs,
	"string":     filterString,
	"upper":      filterUpper,
	"lower":      filterLower,
	"round":      filterRound,
	"int":        filterInt,
	"capitalize": filterCapitalize,
	"map":        nil, // set in init: filterMap calls vigilFilters
}

func init() {
	vigilFilters["map"] = filterMap
	vigilFilterValues[vigilFilterPrefix+"map"] = jinja.NewCallable("map", filterMap)
}

// vigilFilterValues are vigilFilters as render data.
var vigilFilterValues = func() map[string]jinja.Value {
	m := make(map[string]jinja.Value, len(vigilFilters))
	for name, fn := range vigilFilters {
		m[vigilFilterPrefix+name] = jinja.NewCallable(name, fn)
	}
	return m
}()

// arg returns the i-th positional argument or the keyword argument name,
// and whether either was given (None counts as not given).
func arg(args []jinja.Value, kwargs map[string]jinja.Value, i int, name string) (jinja.Value, bool) {
	if v, ok := kwargs[name]; ok {
		return v, !v.IsNone()
	}
	if i < len(args) {
		return args[i], !args[i].IsNone()
	}
	return jinja.None(), false
}

// pyWhitespace is what Python's str.strip() removes.
func pyWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ', 0x85, 0xa0, 0x1680,
		0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func filterTrim(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyStr(args[0])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("trim: %w", err)
	}
	if chars, ok := arg(args, kwargs, 1, "chars"); ok {
		if !chars.IsString() {
			return jinja.Value{}, fmt.Errorf("trim: chars must be a string")
		}
		return jinja.NewString(strings.Trim(s, chars.AsString())), nil
	}
	return jinja.NewString(strings.TrimFunc(s, pyWhitespace)), nil
}

// filterTruncate is jinja2's do_truncate with the default leeway 5.
func filterTruncate(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyStr(args[0])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("truncate: %w", err)
	}
	length, leeway, end := 255, 5, "..."
	killwords := false
	if v, ok := arg(args, kwargs, 1, "length"); ok {
		if !v.IsInt() {
			return jinja.Value{}, fmt.Errorf("truncate: length must be an integer")
		}
		length = int(v.AsInt())
	}
	if v, ok := arg(args, kwargs, 2, "killwords"); ok {
		killwords = v.IsTruthy()
	}
	if v, ok := arg(args, kwargs, 3, "end"); ok {
		if !v.IsString() {
			return jinja.Value{}, fmt.Errorf("truncate: end must be a string")
		}
		end = v.AsString()
	}
	if v, ok := arg(args, kwargs, 4, "leeway"); ok {
		if !v.IsInt() || v.AsInt() < 0 {
			return jinja.Value{}, fmt.Errorf("truncate: expected leeway >= 0")
		}
		leeway = int(v.AsInt())
	}
	r := []rune(s)
	if length < utf8.RuneCountInString(end) {
		return jinja.Value{}, fmt.Errorf("truncate: expected length >= %d, got %d", utf8.RuneCountInString(end), length)
	}
	if len(r) <= length+leeway {
		return jinja.NewString(s), nil
	}
	head := string(r[:length-utf8.RuneCountInString(end)])
	if !killwords {
		if i := strings.LastIndexByte(head, ' '); i >= 0 {
			head = head[:i]
		}
	}
	return jinja.NewString(head + end), nil
}

// pyStr is Python's str() of a scalar; containers and undefined values
// are refused (their Python text is not what the library prints).
func pyStr(v jinja.Value) (string, error) {
	switch {
	case v.IsString():
		return v.AsString(), nil
	case v.IsUndefined():
		return "", nil // jinja2.Undefined prints as ""
	case v.IsNone():
		return "None", nil
	case v.IsBool():
		if v.AsBool() {
			return "True", nil
		}
		return "False", nil
	case v.IsInt():
		return strconv.FormatInt(v.AsInt(), 10), nil
	case v.IsFloat():
		return pyFloat(v.AsFloat()), nil
	}
	return "", fmt.Errorf("a %s value is not supported here", kindName(v))
}

func kindName(v jinja.Value) string {
	switch {
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	}
	return "callable"
}

// pyFloat is Python's repr of a float.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, x)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func filterFirst(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	items, err := pyItems(args[0])
	if err != nil || len(items) == 0 {
		return jinja.Undefined(), err
	}
	return items[0], nil
}

func filterLast(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	items, err := pyItems(args[0])
	if err != nil || len(items) == 0 {
		return jinja.Undefined(), err
	}
	return items[len(items)-1], nil
}

// pyItems is what iterating a value gives in Python: a list's items, a
// dict's keys, a string's characters.
func pyItems(v jinja.Value) ([]jinja.Value, error) {
	switch {
	case v.IsUndefined():
		return nil, nil
	case v.IsList():
		return v.AsList().Items, nil
	case v.IsDict():
		var keys []jinja.Value
		for _, k := range v.AsDict().Keys {
			keys = append(keys, jinja.NewString(k))
		}
		return keys, nil
	case v.IsString():
		var chars []jinja.Value
		for _, r := range v.AsString() {
			chars = append(chars, jinja.NewString(string(r)))
		}
		return chars, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", pyTypeName(v))
}

func filterAbs(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v := args[0]
	switch {
	case v.IsFloat():
		return jinja.NewFloat(math.Abs(v.AsFloat())), nil
	case isNum(v):
		return jinja.NewInt(max(asInt(v), -asInt(v))), nil
	}
	return jinja.Value{}, fmt.Errorf("abs: bad operand type %s", pyTypeName(v))
}

func filterString(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyRepr(args[0])
	return jinja.NewString(s), err
}

// Python's str.upper and str.lower map ß to SS and the like.
func filterUpper(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyStr(args[0])
	return jinja.NewString(cases.Upper(language.Und).String(s)), err
}

func filterLower(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyStr(args[0])
	return jinja.NewString(cases.Lower(language.Und).String(s)), err
}

// filterRound is jinja2's round(value, precision=0, method="common"):
// Python's round (half to even on the binary value) for common.
func filterRound(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if !isNum(args[0]) {
		return jinja.Value{}, fmt.Errorf("round: a number is required, not %s", pyTypeName(args[0]))
	}
	prec := 0
	if v, ok := arg(args, kwargs, 1, "precision"); ok && v.IsInt() {
		prec = int(v.AsInt())
	}
	method := "common"
	if v, ok := arg(args, kwargs, 2, "method"); ok && v.IsString() {
		method = v.AsString()
	}
	if method == "common" && !args[0].IsFloat() {
		return jinja.NewInt(asInt(args[0])), nil // round(int, n) stays an int
	}
	p := math.Pow(10, float64(prec))
	x := asFloat(args[0]) * p
	switch method {
	case "common":
		x = math.RoundToEven(x)
	case "floor":
		x = math.Floor(x)
	case "ceil":
		x = math.Ceil(x)
	default:
		return jinja.Value{}, fmt.Errorf("round: method must be common, ceil or floor")
	}
	return jinja.NewFloat(x / p), nil
}

// filterInt is jinja2's int(value, default=0, base=10): int(), else
// int(float()), else default.
func filterInt(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	v := args[0]
	def, ok := arg(args, kwargs, 1, "default")
	if !ok {
		def = jinja.NewInt(0)
	}
	base := int64(10)
	if b, ok := arg(args, kwargs, 2, "base"); ok && b.IsInt() {
		base = b.AsInt()
	}
	switch {
	case v.IsUndefined():
		return jinja.Value{}, fmt.Errorf("int of an undefined value (Python's Jinja raises UndefinedError)")
	case v.IsInt() || v.IsBool():
		return jinja.NewInt(asInt(v)), nil
	case v.IsFloat():
		return floatToInt(v.AsFloat(), def)
	case !v.IsString():
		return def, nil
	}
	s := strings.TrimFunc(v.AsString(), pyWhitespace)
	for _, r := range s {
		if r > 0x7f {
			return jinja.Value{}, fmt.Errorf("int of non-ASCII text is not supported")
		}
	}
	if n, ok := pyParseInt(s, int(base)); ok {
		return jinja.NewInt(n), nil
	}
	if s, ok := pyDigits(s); ok && !strings.ContainsAny(s, "xXpP") {
		if f, err := strconv.ParseFloat(s, 64); err == nil || math.IsInf(f, 0) {
			return floatToInt(f, def)
		}
	}
	return def, nil
}

func floatToInt(f float64, def jinja.Value) (jinja.Value, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return def, nil
	case math.Abs(f) >= 1<<63:
		return jinja.Value{}, fmt.Errorf("int: %g is too large", f)
	}
	return jinja.NewInt(int64(f)), nil
}

// pyParseInt is Python's int(s, base) for ASCII text s.
func pyParseInt(s string, base int) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if neg && strings.HasPrefix(s, "+") {
		return 0, false
	}
	prefix := map[int]string{16: "0x", 8: "0o", 2: "0b"}[base]
	if p := strings.ToLower(s); prefix != "" && strings.HasPrefix(p, prefix) {
		s = strings.TrimPrefix(s[2:], "_")
	}
	s, ok := pyDigits(s)
	if !ok || s == "" || strings.ContainsAny(s, "+-") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// pyDigits removes the underscores Python allows between digits.
func pyDigits(s string) (string, bool) {
	if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return "", false
	}
	return strings.ReplaceAll(s, "_", ""), true
}

// filterCapitalize is Python's str.capitalize: the first character in
// title case, the rest lower case.
func filterCapitalize(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	s, err := pyStr(args[0])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("capitalize: %w", err)
	}
	if i := strings.IndexFunc(s, caseDiffers); i >= 0 {
		return jinja.Value{}, fmt.Errorf("capitalize: U+%04X is not supported", []rune(s[i:])[0])
	}
	for i, r := range s {
		return jinja.NewString(string(unicode.ToTitle(r)) + strings.ToLower(s[i+utf8.RuneLen(r):])), nil
	}
	return jinja.NewString(""), nil
}

// filterMap is jinja2's map: map(attribute="a.b", default=...) or
// map("filter", args...) for the filters vigil renders itself.
func filterMap(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	items, err := pyItems(args[0])
	if err != nil {
		return jinja.Value{}, fmt.Errorf("map: %w", err)
	}
	out := make([]jinja.Value, len(items))
	if attr, ok := kwargs["attribute"]; ok {
		def, hasDef := kwargs["default"]
		for i, it := range items {
			out[i] = pyGetAttr(it, attr)
			if out[i].IsUndefined() && hasDef {
				out[i] = def
			}
		}
		return jinja.NewList(out), nil
	}
	if len(args) < 2 || !args[1].IsString() || vigilFilters[args[1].AsString()] == nil {
		return jinja.Value{}, fmt.Errorf("map: only attribute= and the filters %s are supported", "tojson, trim, format, truncate, first, last, abs, string, upper, lower, round, int, capitalize")
	}
	fn := vigilFilters[args[1].AsString()]
	for i, it := range items {
		if out[i], err = fn(append([]jinja.Value{it}, args[2:]...), kwargs); err != nil {
			return jinja.Value{}, err
		}
	}
	return jinja.NewList(out), nil
}

// pyGetAttr is jinja2's attribute lookup of a dotted path in dicts (and
// integer parts as list indices).
func pyGetAttr(v, attr jinja.Value) jinja.Value {
	path := []string{printKey(attr)}
	if attr.IsString() {
		path = strings.Split(attr.AsString(), ".")
	}
	for _, p := range path {
		switch {
		case v.IsDict():
			var ok bool
			if v, ok = v.AsDict().Get(p); !ok {
				return jinja.Undefined()
			}
		case v.IsList():
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n >= v.AsList().Len() {
				return jinja.Undefined()
			}
			v = v.AsList().Get(n)
		default:
			return jinja.Undefined()
		}
	}
	return v
}

func printKey(v jinja.Value) string {
	s, _ := pyStr(v)
	return s
}
