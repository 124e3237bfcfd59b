package jinja

import (
	"fmt"
	"slices"
)

type parser struct {
	toks []token
	i    int
}

func (p *parser) cur() token  { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) fail(format string, a ...any) {
	panic(&Error{Line: p.cur().line, Msg: fmt.Sprintf(format, a...)})
}

func (p *parser) isOp(v string) bool   { t := p.cur(); return t.kind == tOp && t.val == v }
func (p *parser) isName(v string) bool { t := p.cur(); return t.kind == tName && t.val == v }

func (p *parser) skipOp(v string) bool {
	if p.isOp(v) {
		p.i++
		return true
	}
	return false
}

func (p *parser) skipName(v string) bool {
	if p.isName(v) {
		p.i++
		return true
	}
	return false
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tBlockEnd:
		return "end of statement block"
	case tVarEnd:
		return "end of print statement"
	case tName:
		return t.val
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return t.val
}

func (p *parser) expectOp(v string) {
	if !p.skipOp(v) {
		p.fail("expected token '%s', got '%s'", v, describe(p.cur()))
	}
}

func (p *parser) expectName() string {
	t := p.cur()
	if t.kind != tName {
		p.fail("expected token 'name', got '%s'", describe(t))
	}
	p.i++
	return t.val
}

func (p *parser) expectBlockEnd() {
	if p.cur().kind != tBlockEnd {
		p.fail("expected token 'end of statement block', got '%s'", describe(p.cur()))
	}
	p.i++
}

// subparse parses nodes until a block tag named in ends; it leaves the
// parser on that tag's name.
func (p *parser) subparse(ends ...string) []node {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tData:
			p.i++
			body = append(body, &textNode{t.val})
		case tVarBegin:
			p.i++
			x := p.tuple(false)
			if p.cur().kind != tVarEnd {
				p.fail("expected token 'end of print statement', got '%s'", describe(p.cur()))
			}
			p.i++
			body = append(body, &printNode{x})
		case tBlockBegin:
			p.i++
			if p.cur().kind == tName && slices.Contains(ends, p.cur().val) {
				return body
			}
			body = append(body, p.statement(ends))
		case tEOF:
			if len(ends) > 0 {
				p.fail("Unexpected end of template. Jinja was looking for the following tags: %s. The innermost block that needs to be closed is '%s'.", quoteTags(ends), blockOf(ends[0]))
			}
			return body
		default:
			p.fail("unexpected '%s'", describe(t))
		}
	}
}

func quoteTags(ends []string) string {
	s := ""
	for i, e := range ends {
		if i > 0 {
			s += " or "
		}
		s += "'" + e + "'"
	}
	return s
}

func blockOf(end string) string {
	if len(end) > 3 && end[:3] == "end" {
		return end[3:]
	}
	return map[string]string{"elif": "if", "else": "if"}[end]
}

var refused = map[string]bool{"extends": true, "include": true, "import": true, "from": true, "block": true,
	"autoescape": true, "trans": true, "do": true, "debug": true}

func (p *parser) statement(ends []string) node {
	t := p.cur()
	if t.kind != tName {
		p.fail("tag name expected")
	}
	p.i++
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor(t.line)
	case "set":
		return p.parseSet(t.line)
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCall()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "break", "continue":
		p.expectBlockEnd()
		return &loopCtl{brk: t.val == "break"}
	}
	if refused[t.val] {
		p.fail("vigil's template engine does not support the {%% %s %%} tag", t.val)
	}
	if len(ends) > 0 {
		p.fail("Encountered unknown tag '%s'. Jinja was looking for the following tags: %s. The innermost block that needs to be closed is '%s'.", t.val, quoteTags(ends), blockOf(ends[0]))
	}
	p.fail("Encountered unknown tag '%s'.", t.val)
	return nil
}

func (p *parser) parseIf() node {
	n := &ifNode{}
	for {
		n.tests = append(n.tests, p.tuple(false))
		p.expectBlockEnd()
		n.bodies = append(n.bodies, p.subparse("elif", "else", "endif"))
		switch p.next().val {
		case "elif":
			continue
		case "else":
			p.expectBlockEnd()
			n.els = p.subparse("endif")
			p.i++
		}
		p.expectBlockEnd()
		return n
	}
}

func (p *parser) parseFor(line int) node {
	n := &forNode{line: line}
	n.target = p.assignTarget(true)
	if !p.skipName("in") {
		p.fail("expected token 'in', got '%s'", describe(p.cur()))
	}
	n.iter = p.tuple(true, "recursive")
	if p.skipName("if") {
		n.cond = p.expression(true)
	}
	if p.skipName("recursive") {
		p.fail("vigil's template engine does not support recursive for loops")
	}
	p.expectBlockEnd()
	n.body = p.subparse("endfor", "else")
	if p.next().val == "else" {
		p.expectBlockEnd()
		n.els = p.subparse("endfor")
		p.i++
	}
	p.expectBlockEnd()
	return n
}

// assignTarget parses a name, a tuple of names, or (for set) ns.attr.
func (p *parser) assignTarget(tuple bool) expr {
	if !tuple && p.cur().kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].val == "." {
		ns := p.next()
		p.i++
		return &getattr{obj: &nameExpr{name: ns.val, line: ns.line}, name: p.expectName(), line: ns.line}
	}
	first := p.targetName()
	if !p.isOp(",") {
		return first
	}
	items := []expr{first}
	for p.skipOp(",") {
		if p.isName("in") || p.isOp("=") || p.cur().kind == tBlockEnd {
			break
		}
		items = append(items, p.targetName())
	}
	return &tupleExpr{items}
}

func (p *parser) targetName() expr {
	if p.skipOp("(") {
		t := p.assignTarget(true)
		p.expectOp(")")
		return t
	}
	t := p.cur()
	name := p.expectName()
	if name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None" {
		p.fail("can't assign to '%s'", name)
	}
	return &nameExpr{name: name, line: t.line}
}
