package tokenizer

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
)

// ardanlabs/jinja is laxer than the Python Jinja that transformers
// renders with (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, jinja2.Undefined). Its parsed template is unexported, so
// vigil walks it by reflection once at load (the version is pinned in
// go.mod; TestChatTemplateMatchesPythonJinja fails if its shape
// changes): constructs it renders differently are refused, naming them;
// filters vigil renders itself are renamed to names only vigil's render
// data holds (the library looks a filter up there when it has no builtin
// of that name); operators, tests, printing and attribute access are
// wrapped in calls to vigil's functions (chatrewrite.go, chatpy.go).

// libraryFilters are the library's builtin filters that jinja2 also has
// and that render as jinja2's do for the values a chat request gives.
var libraryFilters = []string{
	"batch", "count", "d", "default", "dictsort", "e", "escape", "float",
	"items", "join", "length", "list", "max", "min",
	"reject", "rejectattr", "replace", "reverse", "safe", "select", "selectattr",
	"sort", "sum", "wordcount",
}

// pyTests are jinja2's tests that vigil renders (chatpy.go's pyTest);
// escaped, filter and test are refused.
var pyTests = []string{
	"defined", "undefined", "none", "boolean", "integer", "float", "number", "string",
	"mapping", "iterable", "sequence", "callable", "true", "false", "eq", "equalto", "==",
	"ne", "!=", "gt", "greaterthan", ">", "ge", ">=", "lt", "lessthan", "<", "le", "<=",
	"in", "odd", "even", "divisibleby", "upper", "lower", "sameas",
}

// vigilFilterPrefix starts the render-data name of a filter vigil
// renders itself: the space keeps it out of any template's reach.
const vigilFilterPrefix = "vigil "

// templateUse is what a parsed template uses that its rendering depends on.
type templateUse struct {
	methods map[string]bool // attribute names (str.strip...)
	refused []string        // constructs rendered differently from jinja2
}

const jinjaPkg = "github.com/ardanlabs/jinja"

// checkTemplate walks a compiled template, renames the filters vigil
// renders itself, and returns an error naming every construct that it
// cannot render as transformers' jinja2 does.
func checkTemplate(t *jinja.Template, src string) (u *templateUse, err error) {
	defer func() { // a library of another shape: refuse, never crash
		if r := recover(); r != nil {
			u, err = nil, fmt.Errorf("chat template: this build's template engine has an unexpected shape: %v", r)
		}
	}()
	nodes := reflect.ValueOf(t).Elem().FieldByName("nodes")
	if !nodes.IsValid() || nodes.Kind() != reflect.Slice {
		return nil, fmt.Errorf("chat template: this build's template engine has an unexpected shape")
	}
	if err := fixWhitespace(src, nodes); err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	u = &templateUse{methods: map[string]bool{}}
	u.visit(nodes)
	if len(u.refused) > 0 {
		sort.Strings(u.refused)
		u.refused = slices.Compact(u.refused)
		return nil, fmt.Errorf("chat template uses %s, which vigil cannot render as transformers' Jinja does", strings.Join(u.refused, ", "))
	}
	return u, nil
}

func (u *templateUse) visit(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			u.visit(v.Elem())
		}
	case reflect.Interface:
		if !v.IsNil() {
			u.visit(v.Elem())
			u.replace(v)
		}
	case reflect.Slice:
		for i := range v.Len() {
			u.visit(v.Index(i))
		}
	case reflect.Struct:
		if v.Type().PkgPath() == jinjaPkg {
			u.node(v)
		}
		for i := range v.NumField() {
			u.visit(v.Field(i))
		}
	}
}

// node checks one AST node; v is addressable (reached through a pointer).
func (u *templateUse) node(v reflect.Value) {
	switch v.Type().Name() {
	case "filterExpr":
		u.filter(v)
	case "testExpr":
		if name := v.FieldByName("name").String(); !slices.Contains(pyTests, name) {
			u.refused = append(u.refused, fmt.Sprintf("the test %q", name))
		}
	case "attrExpr":
		attr := v.FieldByName("attr").String()
		u.methods[attr] = true
		if describe(v.FieldByName("obj")) == "'loop'" && (attr == "depth" || attr == "depth0" || attr == "changed") {
			u.refused = append(u.refused, "loop."+attr)
		}
		u.wrap(v, "obj", fnDefined)
	case "itemExpr", "sliceExpr":
		u.wrap(v, "obj", fnDefined)
	case "unaryExpr":
		u.unary(v)
	case "binExpr":
		u.binary(v)
	case "forNode":
		u.wrap(v, "iter", fnIterable)
	case "outputNode":
		u.wrap(v, "expression", fnPrint)
	case "callExpr":
		u.method(v)
		// The library's dict() loses the keyword arguments' order.
		if describe(v.FieldByName("fn")) == "'dict'" && v.FieldByName("kwargs").Len() > 1 {
			u.refused = append(u.refused, "dict() with more than one keyword argument (use a {...} literal)")
		}
	case "filterBlockNode":
		u.refused = append(u.refused, "a {% filter %} block")
	}
}

// mutating are the methods jinja2's immutable sandbox refuses to call
// on lists and dicts (SecurityError); strings have none of them.
var mutating = map[string]bool{"append": true, "extend": true, "insert": true, "pop": true, "remove": true,
	"reverse": true, "sort": true, "clear": true, "popitem": true, "setdefault": true, "update": true}

// pyOps are the binary operators vigil evaluates as Python does.
var pyOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "//": true, "%": true, "**": true,
	"<": true, ">": true, "<=": true, ">=": true, "==": true, "!=": true, "in": true, "not in": true}

func (u *templateUse) binary(v reflect.Value) {
	if v.FieldByName("op").String() == "~" {
		u.wrap(v, "left", fnPrint)
		u.wrap(v, "right", fnPrint)
	}
}

// replace puts vigil's operator or test in place of the library's one
// that the expression interface e holds (its children already checked).
func (u *templateUse) replace(e reflect.Value) {
	if e.Elem().Kind() != reflect.Pointer {
		return
	}
	n := e.Elem().Elem()
	var err error
	switch n.Type().Name() {
	case "binExpr":
		if op := n.FieldByName("op").String(); pyOps[op] {
			err = replaceWithCall(e, fnBinop, n.FieldByName("left"), n.FieldByName("right"), op)
		}
	case "callExpr":
		if m := calledMethod(n.FieldByName("fn")); mutating[m] {
			err = replaceWithCall(e, fnUnsafe, describe(n.FieldByName("fn")))
		}
	case "testExpr":
		neg := map[bool]string{true: "not", false: ""}[n.FieldByName("negated").Bool()]
		parts := []any{n.FieldByName("expr"), n.FieldByName("name").String(), neg}
		for i, a := 0, n.FieldByName("args"); i < a.Len(); i++ {
			parts = append(parts, a.Index(i))
		}
		err = replaceWithCall(e, fnTest, parts...)
	}
	if err != nil {
		u.refused = append(u.refused, fmt.Sprintf("an expression vigil cannot check (%v)", err))
	}
}

func (u *templateUse) wrap(v reflect.Value, field, fn string) {
	if err := wrap(v.FieldByName(field), fn); err != nil {
		u.refused = append(u.refused, fmt.Sprintf("an expression vigil cannot check (%v)", err))
	}
}

// unary checks a unary minus or plus. The library binds it looser than a
// filter or test and cannot tell -x|f from -(x|f), where Python applies
// the filter to -x; and it gives 0 for a non-number, where Python raises.
func (u *templateUse) unary(v reflect.Value) {
	op := v.FieldByName("op").String()
	if op != "-" && op != "+" {
		return
	}
	if e := v.FieldByName("operand"); e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.Pointer {
		if n := e.Elem().Elem().Type().Name(); n == "filterExpr" || n == "testExpr" {
			u.refused = append(u.refused, fmt.Sprintf("a unary %s before a filter or test (Python's Jinja applies the filter to %sx: write (%sx)|f, or 0 - x|f)", op, op, op))
			return
		}
	}
	u.wrap(v, "operand", fnUnary+op)
}

func (u *templateUse) filter(v reflect.Value) {
	f := v.FieldByName("name")
	name := f.String()
	switch {
	case vigilFilters[name] != nil:
		setString(f, vigilFilterPrefix+name)
	case !slices.Contains(libraryFilters, name):
		u.refused = append(u.refused, fmt.Sprintf("the filter %q", name))
	}
}

// inexactMethods are string methods the library renders differently
// from Python (title and capitalize case only some characters; format
// ignores named fields and format specs).
var inexactMethods = map[string]bool{"title": true, "capitalize": true, "format": true}

func (u *templateUse) method(call reflect.Value) {
	m := calledMethod(call.FieldByName("fn"))
	args := call.FieldByName("args")
	switch {
	case inexactMethods[m]:
		u.refused = append(u.refused, fmt.Sprintf("the string method .%s()", m))
	case m == "split" && args.Len() > 1:
		u.refused = append(u.refused, ".split() with a maximum number of splits")
	case (m == "startswith" || m == "endswith") && args.Len() > 0 && isList(args.Index(0)):
		u.refused = append(u.refused, fmt.Sprintf(".%s() with a tuple", m))
	}
}

func isList(e reflect.Value) bool {
	return e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.Pointer &&
		e.Elem().Elem().Type().Name() == "listExpr"
}

// calledMethod is the attribute name a call expression calls, or "".
func calledMethod(fn reflect.Value) string {
	if fn.Kind() == reflect.Interface && !fn.IsNil() {
		fn = fn.Elem()
	}
	if fn.Kind() != reflect.Pointer || fn.IsNil() || fn.Elem().Type().Name() != "attrExpr" {
		return ""
	}
	return fn.Elem().FieldByName("attr").String()
}
