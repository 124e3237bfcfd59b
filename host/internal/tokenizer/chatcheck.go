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
// vigil reads it by reflection once at load (the version is pinned in
// go.mod; TestTemplateCheck fails if the shape changes): constructs it
// renders differently are refused, naming them, and the filters vigil
// renders itself are renamed to names only vigil's render data holds
// (the library looks a filter up there when it has no builtin of that
// name).

// libraryFilters are the library's builtin filters that jinja2 also has
// and that render as jinja2's do for the values a chat request gives.
var libraryFilters = []string{
	"abs", "batch", "count", "d", "default", "dictsort", "e", "escape", "first", "float",
	"indent", "int", "items", "join", "last", "length", "list", "lower", "max", "min",
	"reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr",
	"sort", "string", "sum", "unique", "upper", "wordcount",
}

// libraryTests are the library's tests that jinja2 also has. jinja2's
// divisibleby, escaped, filter and test are missing from the library,
// which cannot be given tests: templates using them are refused.
var libraryTests = []string{
	"defined", "undefined", "none", "boolean", "integer", "float", "number", "string",
	"mapping", "iterable", "sequence", "callable", "true", "false", "eq", "equalto", "==",
	"ne", "!=", "gt", "greaterthan", ">", "ge", ">=", "lt", "lessthan", "<", "le", "<=",
	"in", "odd", "even", "upper", "lower", "sameas",
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
func checkTemplate(t *jinja.Template) (*templateUse, error) {
	nodes := reflect.ValueOf(t).Elem().FieldByName("nodes")
	if !nodes.IsValid() || nodes.Kind() != reflect.Slice {
		return nil, fmt.Errorf("chat template: this build's template engine has an unexpected shape")
	}
	u := &templateUse{methods: map[string]bool{}}
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
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			u.visit(v.Elem())
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
		if name := v.FieldByName("name").String(); !slices.Contains(libraryTests, name) {
			u.refused = append(u.refused, fmt.Sprintf("the test %q", name))
		}
	case "attrExpr":
		u.methods[v.FieldByName("attr").String()] = true
		u.wrap(v, "obj", fnDefined)
	case "itemExpr", "sliceExpr":
		u.wrap(v, "obj", fnDefined)
	case "unaryExpr":
		if v.FieldByName("op").String() != "not" {
			u.wrap(v, "operand", fnDefined)
		}
	case "binExpr":
		u.binary(v)
	case "forNode":
		u.wrap(v, "iter", fnIterable)
	case "outputNode":
		u.wrap(v, "expression", fnPrint)
	case "callExpr":
		if m := calledMethod(v.FieldByName("fn")); inexactMethods[m] {
			u.refused = append(u.refused, fmt.Sprintf("the string method .%s()", m))
		}
		// The library's dict() loses the keyword arguments' order.
		if describe(v.FieldByName("fn")) == "'dict'" && v.FieldByName("kwargs").Len() > 1 {
			u.refused = append(u.refused, "dict() with more than one keyword argument (use a {...} literal)")
		}
	case "filterBlockNode":
		u.refused = append(u.refused, "a {% filter %} block")
	}
}

// arithmetic are the operators that raise on an undefined operand.
var arithmetic = map[string]bool{"+": true, "-": true, "*": true, "/": true, "//": true, "%": true, "**": true,
	"<": true, ">": true, "<=": true, ">=": true}

func (u *templateUse) binary(v reflect.Value) {
	op := v.FieldByName("op").String()
	switch {
	case op == "%" && isStringLiteral(v.FieldByName("left")):
		u.refused = append(u.refused, `string formatting with "%" (use the format filter)`)
	case arithmetic[op]:
		u.wrap(v, "left", fnDefined)
		u.wrap(v, "right", fnDefined)
	case op == "~":
		u.wrap(v, "left", fnPrint)
		u.wrap(v, "right", fnPrint)
	}
}

func (u *templateUse) wrap(v reflect.Value, field, fn string) {
	if err := wrap(v.FieldByName(field), fn); err != nil {
		u.refused = append(u.refused, fmt.Sprintf("an expression vigil cannot check (%v)", err))
	}
}

func (u *templateUse) filter(v reflect.Value) {
	f := v.FieldByName("name")
	name := f.String()
	switch {
	case vigilFilters[name] != nil:
		setString(f, vigilFilterPrefix+name)
	case name == "map" && !hasKwarg(v, "attribute"):
		u.refused = append(u.refused, `the map filter without attribute=`)
	case !slices.Contains(libraryFilters, name):
		u.refused = append(u.refused, fmt.Sprintf("the filter %q", name))
	}
}

func hasKwarg(filter reflect.Value, name string) bool {
	kw := filter.FieldByName("kwargs")
	for i := range kw.Len() {
		if kw.Index(i).FieldByName("name").String() == name {
			return true
		}
	}
	return false
}

// inexactMethods are string methods the library renders differently
// from Python (title and capitalize case only some characters; format
// ignores named fields and format specs).
var inexactMethods = map[string]bool{"title": true, "capitalize": true, "format": true}

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

// isStringLiteral reports whether an expression (an interface holding
// a *litExpr) is a string literal.
func isStringLiteral(e reflect.Value) bool {
	if e.Kind() == reflect.Interface && !e.IsNil() {
		e = e.Elem()
	}
	if e.Kind() != reflect.Pointer || e.IsNil() || e.Elem().Type().Name() != "litExpr" {
		return false
	}
	return e.Elem().FieldByName("val").FieldByName("kind").Int() == int64(jinja.KindString)
}
