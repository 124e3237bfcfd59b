package jinja

// Expressions.
type (
	expr      interface{}
	constExpr struct{ v any }
	nameExpr  struct {
		name string
		line int
	}
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
	getattr   struct {
		obj  expr
		name string
		line int
	}
	getitem struct {
		obj, key expr
		line     int
	}
	sliceExpr struct{ start, stop, step expr }
	binExpr   struct {
		op   string
		l, r expr
		line int
	}
	unaryExpr struct {
		op   string
		x    expr
		line int
	}
	condExpr struct{ test, yes, no expr }
	compare  struct {
		first expr
		ops   []string
		rest  []expr
		line  int
	}
	callExpr struct {
		fn    expr
		args  []expr
		names []string
		kw    []expr
		line  int
	}
	filterExpr struct {
		x     expr // nil in a {% filter %} block
		name  string
		args  []expr
		names []string
		kw    []expr
		line  int
	}
	testExpr struct {
		x      expr
		name   string
		args   []expr
		names  []string
		kw     []expr
		negate bool
		line   int
	}
)

// Statements.
type (
	node      interface{}
	textNode  struct{ s string }
	printNode struct{ x expr }
	ifNode    struct {
		tests  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		target expr
		iter   expr
		cond   expr
		body   []node
		els    []node
		line   int
	}
	setNode struct {
		target expr
		x      expr
		body   []node
		filter *filterExpr
		line   int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned to the end of params
		body     []node
		varargs  bool
		kwargs   bool
	}
	callBlock struct {
		call     *callExpr
		params   []string
		defaults []expr
		body     []node
	}
	filterBlock struct {
		filters []*filterExpr
		body    []node
	}
	withNode struct {
		targets []expr
		vals    []expr
		body    []node
	}
	loopCtl struct{ brk bool }
)
