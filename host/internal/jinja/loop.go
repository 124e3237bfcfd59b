package jinja

type loopObj struct {
	items []any
	i     int
	last  *any // loop.changed's last value
}

func (ev *evaluator) forLoop(n *forNode, f *frame) error {
	it, err := ev.eval(n.iter, f)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return lined(err, n.line)
	}
	inner := &frame{vars: map[string]any{}, parent: f}
	if n.cond != nil {
		var kept []any
		for _, v := range items {
			if err := assign(n.target, v, inner); err != nil {
				return err
			}
			c, err := ev.eval(n.cond, inner)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, v)
			}
		}
		items = kept
	}
	loop := &loopObj{items: items}
	for i, v := range items {
		if ev.iters++; ev.iters > maxItems {
			return &Error{Line: n.line, Msg: "the template's loops exceed vigil's limit of iterations"}
		}
		loop.i = i
		inner.vars["loop"] = loop
		if err := assign(n.target, v, inner); err != nil {
			return lined(err, n.line)
		}
		if err := ev.exec(n.body, inner); err != nil {
			if c, ok := err.(*ctlSignal); ok {
				if c.brk {
					break
				}
				continue
			}
			return err
		}
	}
	if len(items) == 0 {
		return ev.exec(n.els, f)
	}
	return nil
}

func (l *loopObj) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.i + 1)
	case "index0":
		return int64(l.i)
	case "revindex":
		return int64(n - l.i)
	case "revindex0":
		return int64(n - l.i - 1)
	case "first":
		return l.i == 0
	case "last":
		return l.i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.i == 0 {
			return &Undefined{"there is no previous item"}
		}
		return l.items[l.i-1]
	case "nextitem":
		if l.i+1 >= n {
			return &Undefined{"there is no next item"}
		}
		return l.items[l.i+1]
	case "cycle", "changed":
		return &method{recv: l, name: name}
	}
	return undefAttr(l, name)
}

func (l *loopObj) call(name string, args []any) (any, error) {
	if name == "cycle" {
		if len(args) == 0 {
			return nil, typeErr("no items for cycling given")
		}
		return args[l.i%len(args)], nil
	}
	v := any(Tuple(args))
	if l.last != nil && pyEqual(*l.last, v) {
		return false, nil
	}
	l.last = &v
	return true, nil
}

// Macro is a {% macro %}: called with positional and keyword arguments.
type Macro struct {
	name     string
	params   []string
	defaults []expr
	body     []node
	closure  *frame
	varargs  bool
	kwargs   bool
}

func (ev *evaluator) callMacro(m *Macro, a *args, caller any) (any, error) {
	if ev.depth++; ev.depth > maxDepth {
		return nil, &Error{Msg: "the template's macro calls nest deeper than vigil's limit"}
	}
	defer func() { ev.depth-- }()
	f := &frame{vars: map[string]any{}, parent: m.closure}
	if len(a.pos) > len(m.params) && !m.varargs {
		return nil, typeErr("macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
	}
	if m.varargs {
		f.vars["varargs"] = Tuple(append([]any{}, a.pos[min(len(a.pos), len(m.params)):]...))
	}
	firstDef := len(m.params) - len(m.defaults)
	for i, p := range m.params {
		v, ok := a.get(i, p)
		switch {
		case ok:
		case i >= firstDef:
			var err error
			if v, err = ev.eval(m.defaults[i-firstDef], f); err != nil {
				return nil, err
			}
		default:
			v = &Undefined{"parameter '" + p + "' was not provided"}
		}
		f.vars[p] = v
	}
	if err := macroKwargs(m, a, f); err != nil {
		return nil, err
	}
	if caller != nil {
		f.vars["caller"] = caller
	}
	s, err := ev.capture(m.body, f)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (ev *evaluator) callBlock(n *callBlock, f *frame) error {
	caller := &Macro{name: "caller", params: n.params, defaults: n.defaults, body: n.body, closure: f}
	fn, err := ev.eval(n.call.fn, f)
	if err != nil {
		return err
	}
	m, ok := fn.(*Macro)
	if !ok {
		return &Error{Line: n.call.line, Msg: "vigil's template engine calls only macros from {% call %}"}
	}
	a, err := ev.args(n.call.args, n.call.names, n.call.kw, f)
	if err != nil {
		return err
	}
	v, err := ev.callMacro(m, a, caller)
	if err != nil {
		return err
	}
	return ev.write(pyStr(v))
}

// macroKwargs checks keyword arguments against the parameters; the
// others go to kwargs when the body names it.
func macroKwargs(m *Macro, a *args, f *frame) error {
	kw := NewDict()
	for i, k := range a.names {
		if k == "caller" {
			continue
		}
		found := false
		for _, p := range m.params {
			found = found || p == k
		}
		if !found && !m.kwargs {
			return typeErr("macro '%s' takes no keyword argument '%s'", m.name, k)
		}
		if !found {
			_ = kw.Set(k, a.kw[i])
		}
	}
	if m.kwargs {
		f.vars["kwargs"] = kw
	}
	return nil
}
