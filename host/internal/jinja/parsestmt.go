package jinja

func (p *parser) parseSet(line int) node {
	n := &setNode{line: line, target: p.assignTarget(false)}
	if p.skipOp("=") {
		n.x = p.tuple(false)
		p.expectBlockEnd()
		return n
	}
	if p.isOp("|") {
		p.i++
		n.filter = p.filterChain()
	}
	p.expectBlockEnd()
	n.body = p.subparse("endset")
	p.i++
	p.expectBlockEnd()
	return n
}

// filterChain parses name(args) | name... for set and filter blocks.
func (p *parser) filterChain() *filterExpr {
	var x expr // nil, not a nil *filterExpr: the chain's start
	for {
		f := p.filterCall(x)
		x = f
		if !p.skipOp("|") {
			return f
		}
	}
}

func (p *parser) signature() ([]string, []expr) {
	var params []string
	var defs []expr
	p.expectOp("(")
	for !p.isOp(")") {
		if len(params) > 0 {
			p.expectOp(",")
		}
		params = append(params, p.expectName())
		if p.skipOp("=") {
			defs = append(defs, p.expression(true))
		} else if len(defs) > 0 {
			p.fail("non-default argument follows default argument")
		}
	}
	p.i++
	return params, defs
}

func (p *parser) parseMacro() node {
	n := &macroNode{name: p.expectName()}
	n.params, n.defaults = p.signature()
	p.expectBlockEnd()
	start := p.i
	n.body = p.subparse("endmacro")
	n.varargs, n.kwargs = usesNames(p.toks[start:p.i])
	p.i++
	p.skipName(n.name)
	p.expectBlockEnd()
	return n
}

// usesNames tells whether a macro body names varargs or kwargs, which
// jinja2 decides at compile time too: then extra arguments are allowed.
func usesNames(toks []token) (varargs, kwargs bool) {
	for _, t := range toks {
		if t.kind == tName {
			varargs = varargs || t.val == "varargs"
			kwargs = kwargs || t.val == "kwargs"
		}
	}
	return varargs, kwargs
}

func (p *parser) parseCall() node {
	n := &callBlock{}
	if p.isOp("(") {
		n.params, n.defaults = p.signature()
	}
	x := p.expression(true)
	c, ok := x.(*callExpr)
	if !ok {
		p.fail("expected call")
	}
	n.call = c
	p.expectBlockEnd()
	n.body = p.subparse("endcall")
	p.i++
	p.expectBlockEnd()
	return n
}

func (p *parser) parseFilterBlock() node {
	n := &filterBlock{}
	for f := p.filterChain(); f != nil; f, _ = f.x.(*filterExpr) {
		n.filters = append([]*filterExpr{f}, n.filters...)
	}
	p.expectBlockEnd()
	n.body = p.subparse("endfilter")
	p.i++
	p.expectBlockEnd()
	return n
}

func (p *parser) parseWith() node {
	n := &withNode{}
	for p.cur().kind != tBlockEnd {
		if len(n.targets) > 0 {
			p.expectOp(",")
		}
		n.targets = append(n.targets, p.assignTarget(true))
		p.expectOp("=")
		n.vals = append(n.vals, p.expression(true))
	}
	p.i++
	n.body = p.subparse("endwith")
	p.i++
	p.expectBlockEnd()
	return n
}
