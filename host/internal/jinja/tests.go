package jinja

import "unicode"

type testFn func(ev *evaluator, v any, a *args) (bool, error)

func (ev *evaluator) test(x *testExpr, f *frame) (any, error) {
	v, err := ev.eval(x.x, f)
	if err != nil {
		return nil, err
	}
	a, err := ev.args(x.args, x.names, x.kw, f)
	if err != nil {
		return nil, err
	}
	ok, err := tests[x.name](ev, v, a)
	if err != nil {
		return nil, lined(err, x.line)
	}
	return ok != x.negate, nil
}

func typeTest(fn func(any) bool) testFn {
	return func(_ *evaluator, v any, _ *args) (bool, error) { return fn(v), nil }
}

func cmpTest(op string) testFn {
	return func(_ *evaluator, v any, a *args) (bool, error) {
		other, ok := a.get(0, "other")
		if !ok {
			return false, typeErr("test takes exactly one argument")
		}
		r, err := compareOp(op, v, other)
		if err != nil {
			return false, err
		}
		return r.(bool), nil
	}
}

func modTest(by any, want int64) testFn {
	return func(_ *evaluator, v any, a *args) (bool, error) {
		d := by
		if d == nil {
			var ok bool
			if d, ok = a.get(0, "num"); !ok {
				return false, typeErr("divisibleby() missing 1 required positional argument: 'num'")
			}
		}
		r, err := binop("%", v, d)
		if err != nil {
			return false, err
		}
		return pyEqual(r, want), nil
	}
}

func caseTest(upper bool) testFn {
	return func(_ *evaluator, v any, _ *args) (bool, error) {
		cased := false
		for _, r := range softStr(v) {
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				if !upper {
					return false, nil
				}
				cased = true
			} else if unicode.IsLower(r) {
				if upper {
					return false, nil
				}
				cased = true
			}
		}
		return cased, nil
	}
}

func isUndef(v any) bool { _, ok := v.(*Undefined); return ok }

func testsMap() map[string]testFn {
	m := map[string]testFn{
		"defined":   typeTest(func(v any) bool { return !isUndef(v) }),
		"undefined": typeTest(isUndef),
		"none":      typeTest(func(v any) bool { return v == nil }),
		"boolean":   typeTest(func(v any) bool { _, ok := v.(bool); return ok }),
		"true":      typeTest(func(v any) bool { return v == true }),
		"false":     typeTest(func(v any) bool { return v == false }),
		"integer":   typeTest(func(v any) bool { _, ok := v.(int64); return ok }),
		"float":     typeTest(func(v any) bool { _, ok := v.(float64); return ok }),
		"number":    typeTest(func(v any) bool { _, _, _, ok := num(v); return ok }),
		"string":    typeTest(func(v any) bool { _, ok := v.(string); return ok }),
		"mapping":   typeTest(func(v any) bool { _, ok := v.(*Dict); return ok }),
		"iterable":  typeTest(func(v any) bool { _, err := iterate(v); return err == nil }),
		"sequence":  typeTest(isSequence),
		"callable":  typeTest(isCallable),
		"escaped":   typeTest(func(any) bool { return false }),
		"sameas":    sameas,
		"in": func(_ *evaluator, v any, a *args) (bool, error) {
			return contains(a.or(0, "seq", nil), v)
		},
		"odd": modTest(int64(2), 1), "even": modTest(int64(2), 0), "divisibleby": modTest(nil, 0),
		"lower": caseTest(false), "upper": caseTest(true),
		"filter": typeTest(func(v any) bool { s, ok := v.(string); return ok && filters[s] != nil }),
	}
	m["test"] = typeTest(func(v any) bool { s, ok := v.(string); return ok && m[s] != nil })
	for op, names := range map[string][]string{"==": {"eq", "equalto"}, "!=": {"ne"}, "<": {"lt", "lessthan"},
		"<=": {"le"}, ">": {"gt", "greaterthan"}, ">=": {"ge"}} {
		m[op] = cmpTest(op)
		for _, n := range names {
			m[n] = cmpTest(op)
		}
	}
	return m
}

func isSequence(v any) bool {
	switch x := v.(type) {
	case string, []any, Tuple, *Dict, *Undefined:
		return true
	case *Gen:
		return x.kind == "range"
	}
	return false
}

func isCallable(v any) bool {
	switch v.(type) {
	case *Macro, builtin, *method:
		return true
	}
	return false
}

func sameas(_ *evaluator, v any, a *args) (bool, error) {
	o, _ := a.get(0, "other")
	switch o.(type) {
	case nil, bool:
		return v == o, nil
	}
	switch v.(type) {
	case nil, bool:
		return false, nil
	}
	return false, typeErr("vigil's template engine tests sameas only against None, True and False")
}
