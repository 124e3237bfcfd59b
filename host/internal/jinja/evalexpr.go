package jinja

type args struct {
	pos   []any
	names []string
	kw    []any
}

func (a *args) get(i int, name string) (any, bool) {
	if i >= 0 && i < len(a.pos) {
		return a.pos[i], true
	}
	for j, n := range a.names {
		if n == name {
			return a.kw[j], true
		}
	}
	return nil, false
}

func (a *args) or(i int, name string, def any) any {
	if v, ok := a.get(i, name); ok {
		return v
	}
	return def
}

type builtin func(ev *evaluator, a *args) (any, error)

type method struct {
	recv any
	name string
}

func (ev *evaluator) args(pos []expr, names []string, kw []expr, f *frame) (*args, error) {
	a := &args{names: names}
	for _, x := range pos {
		v, err := ev.eval(x, f)
		if err != nil {
			return nil, err
		}
		a.pos = append(a.pos, v)
	}
	for _, x := range kw {
		v, err := ev.eval(x, f)
		if err != nil {
			return nil, err
		}
		a.kw = append(a.kw, v)
	}
	return a, nil
}

func (ev *evaluator) evalList(items []expr, f *frame) ([]any, error) {
	out := make([]any, 0, len(items))
	for _, x := range items {
		v, err := ev.eval(x, f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (ev *evaluator) eval(x expr, f *frame) (any, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := f.lookup(x.name); ok {
			return v, nil
		}
		return undefName(x.name), nil
	case *listExpr:
		return ev.evalList(x.items, f)
	case *tupleExpr:
		l, err := ev.evalList(x.items, f)
		return Tuple(l), err
	case *dictExpr:
		return ev.dict(x, f)
	case *getattr:
		obj, err := ev.eval(x.obj, f)
		if err != nil {
			return nil, err
		}
		v, err := getAttr(obj, x.name)
		return v, lined(err, x.line)
	case *getitem:
		return ev.getitem(x, f)
	case *binExpr:
		return ev.bin(x, f)
	case *unaryExpr:
		return ev.unary(x, f)
	case *condExpr:
		t, err := ev.eval(x.test, f)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return ev.eval(x.yes, f)
		}
		if x.no == nil {
			return &Undefined{"the inline if-expression on line evaluated to false and no else section was defined."}, nil
		}
		return ev.eval(x.no, f)
	case *compare:
		return ev.compare(x, f)
	case *callExpr:
		return ev.call(x, f)
	case *filterExpr:
		return ev.applyFilter(x, nil, f)
	case *testExpr:
		return ev.test(x, f)
	}
	return nil, &Error{Msg: "unknown expression"}
}

func (ev *evaluator) dict(x *dictExpr, f *frame) (any, error) {
	d := NewDict()
	for i := range x.keys {
		k, err := ev.eval(x.keys[i], f)
		if err != nil {
			return nil, err
		}
		v, err := ev.eval(x.vals[i], f)
		if err != nil {
			return nil, err
		}
		if err := d.Set(k, v); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (ev *evaluator) bin(x *binExpr, f *frame) (any, error) {
	l, err := ev.eval(x.l, f)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return ev.eval(x.r, f)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return ev.eval(x.r, f)
	}
	r, err := ev.eval(x.r, f)
	if err != nil {
		return nil, err
	}
	if x.op == "~" {
		s := pyStr(l) + pyStr(r)
		if len(s) > maxOutput {
			return nil, errTooBig
		}
		return ev.charge(s, nil)
	}
	v, err := ev.charge(binop(x.op, l, r))
	return v, lined(err, x.line)
}

func (ev *evaluator) unary(x *unaryExpr, f *frame) (any, error) {
	v, err := ev.eval(x.x, f)
	if err != nil {
		return nil, err
	}
	if x.op == "not" {
		return !truthy(v), nil
	}
	if u, ok := v.(*Undefined); ok {
		return nil, u.err()
	}
	i, fl, isF, ok := num(v)
	if !ok {
		return nil, typeErr("bad operand type for unary %s: '%s'", x.op, typeName(v))
	}
	if x.op == "+" {
		if isF {
			return fl, nil
		}
		return i, nil
	}
	if isF {
		return -fl, nil
	}
	if i == -1<<63 {
		return nil, errOverflow
	}
	return -i, nil
}

func (ev *evaluator) compare(x *compare, f *frame) (any, error) {
	l, err := ev.eval(x.first, f)
	if err != nil {
		return nil, err
	}
	for i, op := range x.ops {
		r, err := ev.eval(x.rest[i], f)
		if err != nil {
			return nil, err
		}
		v, err := compareOp(op, l, r)
		if err != nil {
			return nil, lined(err, x.line)
		}
		if !v.(bool) {
			return false, nil
		}
		l = r
	}
	return true, nil
}

func (ev *evaluator) call(x *callExpr, f *frame) (any, error) {
	fn, err := ev.eval(x.fn, f)
	if err != nil {
		return nil, err
	}
	a, err := ev.args(x.args, x.names, x.kw, f)
	if err != nil {
		return nil, err
	}
	v, err := ev.charge(ev.callValue(fn, a))
	return v, lined(err, x.line)
}

func (ev *evaluator) callValue(fn any, a *args) (any, error) {
	switch fn := fn.(type) {
	case *Macro:
		var caller any
		if c, ok := a.get(-1, "caller"); ok {
			caller = c
		}
		return ev.callMacro(fn, a, caller)
	case builtin:
		return fn(ev, a)
	case *method:
		if c, ok := fn.recv.(callee); ok {
			return c.call(fn.name, a.pos)
		}
		return callMethod(fn.recv, fn.name, a)
	case *Undefined:
		return nil, fn.err()
	}
	return nil, typeErr("'%s' object is not callable", typeName(fn))
}
