package jinja

import "slices"

// tuple parses an expression or a bare tuple (a, b), as parse_tuple.
func (p *parser) tuple(noCond bool, extraEnds ...string) expr {
	var items []expr
	comma := false
	for {
		if len(items) > 0 {
			if !p.skipOp(",") {
				break
			}
			comma = true
		}
		if p.tupleEnd(extraEnds) {
			break
		}
		items = append(items, p.expression(!noCond))
	}
	if !comma {
		if len(items) == 0 {
			p.fail("Expected an expression, got '%s'", describe(p.cur()))
		}
		return items[0]
	}
	return &tupleExpr{items}
}

func (p *parser) tupleEnd(extra []string) bool {
	t := p.cur()
	switch t.kind {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tName:
		return slices.Contains(extra, t.val)
	case tOp:
		return t.val == ")" || t.val == "]" || t.val == "}"
	}
	return false
}

func (p *parser) expression(withCond bool) expr {
	if !withCond {
		return p.or()
	}
	x := p.or()
	for p.skipName("if") {
		c := &condExpr{test: p.or(), yes: x}
		if p.skipName("else") {
			c.no = p.expression(true)
		}
		x = c
	}
	return x
}

func (p *parser) binLoop(ops []string, names bool, sub func() expr) expr {
	x := sub()
	for {
		t := p.cur()
		if !((names && t.kind == tName || !names && t.kind == tOp) && slices.Contains(ops, t.val)) {
			return x
		}
		p.i++
		x = &binExpr{op: t.val, l: x, r: sub(), line: t.line}
	}
}

func (p *parser) or() expr  { return p.binLoop([]string{"or"}, true, p.and) }
func (p *parser) and() expr { return p.binLoop([]string{"and"}, true, p.not) }

func (p *parser) not() expr {
	if t := p.cur(); p.skipName("not") {
		return &unaryExpr{op: "not", x: p.not(), line: t.line}
	}
	return p.compare()
}

func (p *parser) compare() expr {
	c := &compare{first: p.math1(), line: p.cur().line}
	for {
		t := p.cur()
		switch {
		case t.kind == tOp && slices.Contains([]string{"==", "!=", "<", "<=", ">", ">="}, t.val):
			p.i++
			c.ops = append(c.ops, t.val)
		case p.isName("in"):
			p.i++
			c.ops = append(c.ops, "in")
		case p.isName("not") && p.toks[p.i+1].kind == tName && p.toks[p.i+1].val == "in":
			p.i += 2
			c.ops = append(c.ops, "notin")
		default:
			if len(c.ops) == 0 {
				return c.first
			}
			return c
		}
		c.rest = append(c.rest, p.math1())
	}
}

func (p *parser) math1() expr  { return p.binLoop([]string{"+", "-"}, false, p.concat) }
func (p *parser) concat() expr { return p.binLoop([]string{"~"}, false, p.math2) }
func (p *parser) math2() expr  { return p.binLoop([]string{"*", "/", "//", "%"}, false, p.pow) }
func (p *parser) pow() expr {
	return p.binLoop([]string{"**"}, false, func() expr { return p.unary(true) })
}

func (p *parser) unary(withFilter bool) expr {
	t := p.cur()
	var x expr
	switch {
	case p.skipOp("-"):
		x = &unaryExpr{op: "-", x: p.unary(false), line: t.line}
	case p.skipOp("+"):
		x = &unaryExpr{op: "+", x: p.unary(false), line: t.line}
	default:
		x = p.primary()
	}
	x = p.postfix(x)
	if withFilter {
		x = p.filterTail(x)
	}
	return x
}

func (p *parser) primary() expr {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &constExpr{true}
		case "false", "False":
			return &constExpr{false}
		case "none", "None":
			return &constExpr{nil}
		}
		return &nameExpr{name: t.val, line: t.line}
	case tString:
		s := t.val
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{s}
	case tInt, tFloat:
		return &constExpr{t.num}
	case tOp:
		switch t.val {
		case "(":
			if p.skipOp(")") {
				return &tupleExpr{}
			}
			x := p.tuple(false)
			p.expectOp(")")
			return x
		case "[":
			return p.listLit()
		case "{":
			return p.dictLit()
		}
	}
	p.i--
	p.fail("unexpected '%s'", describe(t))
	return nil
}

func (p *parser) listLit() expr {
	l := &listExpr{}
	for !p.isOp("]") {
		if len(l.items) > 0 {
			p.expectOp(",")
			if p.isOp("]") {
				break
			}
		}
		l.items = append(l.items, p.expression(true))
	}
	p.i++
	return l
}

func (p *parser) dictLit() expr {
	d := &dictExpr{}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			p.expectOp(",")
			if p.isOp("}") {
				break
			}
		}
		d.keys = append(d.keys, p.expression(true))
		p.expectOp(":")
		d.vals = append(d.vals, p.expression(true))
	}
	p.i++
	return d
}
