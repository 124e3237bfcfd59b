package jinja

import (
	"strings"
)

type frame struct {
	vars   map[string]any
	parent *frame
}

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type evaluator struct {
	out   *strings.Builder
	depth int
	iters int
	work  int // bytes of strings and lists built so far (maxWork)
}

// charge counts a built value against maxWork.
func (ev *evaluator) charge(v any, err error) (any, error) {
	switch x := v.(type) {
	case string:
		ev.work += len(x)
	case []any:
		ev.work += 16 * len(x) // an interface value's size
	case *Gen:
		ev.work += 16 * len(x.items)
	}
	if err == nil && ev.work > maxWork {
		return nil, errTooBig
	}
	return v, err
}

type ctlSignal struct{ brk bool }

func (c *ctlSignal) Error() string { return "loop control" }

func (ev *evaluator) write(s string) error {
	if ev.out.Len()+len(s) > maxOutput {
		return errTooBig
	}
	ev.out.WriteString(s)
	return nil
}

// print writes str(v); a generator's repr holds an address, so it is refused.
func (ev *evaluator) print(v any) error {
	switch x := v.(type) {
	case *Gen:
		if x.kind == "" {
			return &Error{Msg: "vigil's template engine does not print a generator (Python prints its address): add |list"}
		}
	case builtin, *method:
		return &Error{Msg: "vigil's template engine does not print a function or method"}
	}
	return ev.write(pyStr(v))
}

func lined(err error, line int) error {
	if e, ok := err.(*Error); ok && e.Line == 0 && line > 0 {
		c := *e
		c.Line = line
		return &c
	}
	return err
}

func (ev *evaluator) exec(body []node, f *frame) error {
	for _, n := range body {
		if err := ev.stmt(n, f); err != nil {
			return err
		}
	}
	return nil
}

func (ev *evaluator) stmt(n node, f *frame) error {
	switch n := n.(type) {
	case *textNode:
		return ev.write(n.s)
	case *printNode:
		v, err := ev.eval(n.x, f)
		if err != nil {
			return err
		}
		return ev.print(v)
	case *ifNode:
		for i, t := range n.tests {
			v, err := ev.eval(t, f)
			if err != nil {
				return err
			}
			if truthy(v) {
				return ev.exec(n.bodies[i], f)
			}
		}
		return ev.exec(n.els, f)
	case *forNode:
		return ev.forLoop(n, f)
	case *setNode:
		return ev.set(n, f)
	case *macroNode:
		f.vars[n.name] = &Macro{name: n.name, params: n.params, defaults: n.defaults, body: n.body, closure: f,
			varargs: n.varargs, kwargs: n.kwargs}
		return nil
	case *callBlock:
		return ev.callBlock(n, f)
	case *filterBlock:
		s, err := ev.capture(n.body, f)
		if err != nil {
			return err
		}
		// The last filter holds the chain: each one's x is the one before.
		v, err := ev.applyFilter(n.filters[len(n.filters)-1], s, f)
		if err != nil {
			return err
		}
		return ev.print(v)
	case *withNode:
		inner := &frame{vars: map[string]any{}, parent: f}
		for i, t := range n.targets {
			v, err := ev.eval(n.vals[i], f)
			if err != nil {
				return err
			}
			if err := assign(t, v, inner); err != nil {
				return err
			}
		}
		return ev.exec(n.body, inner)
	case *loopCtl:
		return &ctlSignal{brk: n.brk}
	}
	return &Error{Msg: "unknown statement"}
}

func (ev *evaluator) capture(body []node, f *frame) (string, error) {
	saved := ev.out
	var b strings.Builder
	ev.out = &b
	err := ev.exec(body, f)
	ev.out = saved
	if b.Len()+saved.Len() > maxOutput {
		return "", errTooBig
	}
	return b.String(), err
}

func (ev *evaluator) set(n *setNode, f *frame) error {
	var v any
	var err error
	if n.body != nil || n.x == nil {
		s, err := ev.capture(n.body, f)
		if err != nil {
			return err
		}
		v = s
		if n.filter != nil {
			if v, err = ev.applyFilter(n.filter, v, f); err != nil {
				return err
			}
		}
	} else if v, err = ev.eval(n.x, f); err != nil {
		return err
	}
	if ga, ok := n.target.(*getattr); ok {
		obj, _ := f.lookup(ga.obj.(*nameExpr).name)
		ns, ok := obj.(*Namespace)
		if !ok {
			return &Error{Line: n.line, Msg: "cannot assign attribute on non-namespace object"}
		}
		return ns.d.Set(ga.name, v)
	}
	return lined(assign(n.target, v, f), n.line)
}

func assign(t expr, v any, f *frame) error {
	switch t := t.(type) {
	case *nameExpr:
		f.vars[t.name] = v
		return nil
	case *tupleExpr:
		items, err := iterate(v)
		if err != nil {
			return err
		}
		if len(items) != len(t.items) {
			if len(items) > len(t.items) {
				return typeErr("too many values to unpack (expected %d)", len(t.items))
			}
			return typeErr("not enough values to unpack (expected %d, got %d)", len(t.items), len(items))
		}
		for i, e := range t.items {
			if err := assign(e, items[i], f); err != nil {
				return err
			}
		}
		return nil
	}
	return typeErr("can't assign")
}

// iterate lists what Python's iter() gives.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case Tuple:
		return x, nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case *Dict:
		return append([]any{}, x.keys...), nil
	case *Gen:
		return x.items, nil
	case *Undefined:
		return nil, nil
	}
	return nil, typeErr("'%s' object is not iterable", typeName(v))
}
