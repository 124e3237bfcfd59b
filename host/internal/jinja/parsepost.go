package jinja

func (p *parser) postfix(x expr) expr {
	for {
		t := p.cur()
		switch {
		case p.isOp("."):
			p.i++
			a := p.next()
			switch a.kind {
			case tName:
				x = &getattr{obj: x, name: a.val, line: t.line}
			case tInt:
				x = &getitem{obj: x, key: &constExpr{a.num}, line: t.line}
			default:
				p.i--
				p.fail("expected name or number")
			}
		case p.isOp("["):
			p.i++
			x = &getitem{obj: x, key: p.subscript(), line: t.line}
		case p.isOp("("):
			x = p.callArgs(x)
		default:
			return x
		}
	}
}

// subscript parses [a], [a:b:c] or [a, b] after the "[".
func (p *parser) subscript() expr {
	var items []expr
	for !p.isOp("]") {
		if len(items) > 0 {
			p.expectOp(",")
		}
		items = append(items, p.subscribed())
	}
	p.i++
	if len(items) == 0 {
		p.fail("expected subscript expression")
	}
	if len(items) == 1 {
		return items[0]
	}
	return &tupleExpr{items}
}

func (p *parser) subscribed() expr {
	var parts [3]expr
	if !p.isOp(":") {
		parts[0] = p.expression(true)
		if !p.isOp(":") {
			return parts[0]
		}
	}
	p.i++
	if !p.isOp("]") && !p.isOp(",") && !p.isOp(":") {
		parts[1] = p.expression(true)
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		parts[2] = p.expression(true)
	}
	return &sliceExpr{parts[0], parts[1], parts[2]}
}

type argList struct {
	args  []expr
	names []string
	kw    []expr
}

func (p *parser) args() argList {
	var a argList
	p.expectOp("(")
	for !p.isOp(")") {
		if len(a.args)+len(a.kw) > 0 {
			p.expectOp(",")
			if p.isOp(")") {
				break
			}
		}
		if p.isOp("*") || p.isOp("**") {
			p.fail("vigil's template engine does not support *args or **kwargs in calls")
		}
		if p.cur().kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].val == "=" {
			a.names = append(a.names, p.next().val)
			p.i++
			a.kw = append(a.kw, p.expression(true))
			continue
		}
		if len(a.kw) > 0 {
			p.fail("Invalid argument syntax")
		}
		a.args = append(a.args, p.expression(true))
	}
	p.i++
	return a
}

func (p *parser) callArgs(fn expr) expr {
	line := p.cur().line
	a := p.args()
	return &callExpr{fn: fn, args: a.args, names: a.names, kw: a.kw, line: line}
}

func (p *parser) filterCall(x expr) *filterExpr {
	t := p.cur()
	name := p.expectName()
	for p.skipOp(".") {
		name += "." + p.expectName()
	}
	f := &filterExpr{x: x, name: name, line: t.line}
	if p.isOp("(") {
		a := p.args()
		f.args, f.names, f.kw = a.args, a.names, a.kw
	}
	if _, ok := filters[name]; !ok {
		p.i--
		if jinja2Filters[name] {
			p.fail("vigil's template engine does not implement the filter '%s'", name)
		}
		p.fail("No filter named '%s'.", name)
	}
	return f
}

func (p *parser) filterTail(x expr) expr {
	for {
		switch {
		case p.isOp("|"):
			p.i++
			x = p.filterCall(x)
		case p.isName("is"):
			x = p.test(x)
		case p.isOp("("):
			x = p.callArgs(x)
		default:
			return x
		}
	}
}

// test parses "is [not] name [args]" as parse_test.
func (p *parser) test(x expr) expr {
	t := p.next()
	neg := p.skipName("not")
	name := p.expectName()
	for p.skipOp(".") {
		name += "." + p.expectName()
	}
	n := &testExpr{x: x, name: name, negate: neg, line: t.line}
	c := p.cur()
	switch {
	case p.isOp("("):
		a := p.args()
		n.args, n.names, n.kw = a.args, a.names, a.kw
	case c.kind == tName || c.kind == tString || c.kind == tInt || c.kind == tFloat || p.isOp("[") || p.isOp("{"):
		if !(c.kind == tName && (c.val == "else" || c.val == "or" || c.val == "and")) {
			a := p.primary()
			n.args = []expr{p.postfix(a)}
		}
	}
	if _, ok := tests[name]; !ok {
		p.fail("No test named '%s'.", name)
	}
	return n
}
