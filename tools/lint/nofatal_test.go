package lint

import (
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/cha"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

// fatalScope is the code TestNothingFatal walks: the tokenizer module and
// its two dependencies. The standard library is not walked: its panics
// guard its own invariants (strings.Builder growth, a negative
// strings.Repeat count), and bounds or nil faults are not calls anyway.
var fatalScope = []string{
	"github.com/vigilhq/vigil/tokenizer",
	"github.com/dlclark/regexp2",
	"golang.org/x/text",
}

// fatalAllowed are the functions whose panics no input reaches, by
// function, with the reason. Anything else must go behind a recover
// boundary (as tokenizer's compileRegexp puts regexp2.Compile).
var fatalAllowed = map[string]string{
	// Called only by regexp2/syntax's package-level tables, with constant
	// arguments that never negate both the set and the category.
	"github.com/dlclark/regexp2/syntax.getCharSetFromCategoryString": "constant arguments at init",
	// Assertions that the iterator reset its count of non-starters, which
	// the package does before the count can pass maxNonStarters (UAX #15's
	// stream-safe format); no text reaches them.
	"(*golang.org/x/text/unicode/norm.streamSafe).next":      "package invariant",
	"(*golang.org/x/text/unicode/norm.streamSafe).backwards": "package invariant",
	// Panics if the recomposition map is unbuilt; its only caller,
	// reorderBuffer.compose (and combineHangul, which compose alone calls),
	// builds it first with recompMapOnce.Do.
	"golang.org/x/text/unicode/norm.combine": "map built by its caller",
}

// fatalFuncs are the calls that end or unwind the process, by package and
// name (a *log.Logger's methods carry the same names).
var fatalFuncs = map[string]map[string]bool{
	"log": {"Fatal": true, "Fatalf": true, "Fatalln": true, "Panic": true, "Panicf": true, "Panicln": true},
	"os":  {"Exit": true},
}

// TestNothingFatal holds issue 24's promise that no input can make the
// tokenizer module panic or exit: from every exported function and method
// of package tokenizer (and its init, which importing runs), no call to
// panic, log.Fatal*, log.Panic* or os.Exit is reachable in fatalScope.
//
// The call graph is CHA's: it assumes every type with a method set is
// stored in every interface it implements and every function is
// address-taken, so an interface or func-value call has an edge to every
// possible callee. It is sound for a library with no main, simple, and
// fast enough; VTA or pointer analysis would only prune edges.
//
// A recover boundary is a function that defers a function calling
// recover(): its own panics and everything it calls are taken as caught,
// so the walk does not enter it.
func TestNothingFatal(t *testing.T) {
	pkg := loadTokenizer(t)
	cg := cha.CallGraph(pkg.Prog)
	roots := exportedRoots(pkg)
	if len(roots) < 5 {
		t.Fatalf("found %d exported roots in %s: too few, is the load wrong?", len(roots), pkg.Pkg.Path())
	}
	hit := map[string]bool{}
	for _, f := range reachableFatal(cg, roots) {
		if _, ok := fatalAllowed[f.fn]; ok {
			hit[f.fn] = true
			continue
		}
		t.Errorf("%s: %s is reachable: %s", f.pos, f.call, f.path)
	}
	// Each entry is reached (which also shows the walk enters both
	// dependencies): one that is not has gone stale and must go.
	for fn := range fatalAllowed {
		if !hit[fn] {
			t.Errorf("fatalAllowed lists %s, which the walk no longer reaches: remove it", fn)
		}
	}
}

// loadTokenizer loads ../../tokenizer (tests excluded) alone, outside
// go.work, as a user's build sees it, and builds the SSA of it and its
// dependencies.
func loadTokenizer(t *testing.T) *ssa.Package {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &packages.Config{Mode: packages.LoadAllSyntax, Dir: dir, Env: append(os.Environ(), "GOWORK=off")}
	initial, err := packages.Load(cfg, ".")
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(initial); n > 0 || len(initial) != 1 {
		t.Fatalf("loading %s: %d errors, %d packages", dir, n, len(initial))
	}
	prog, pkgs := ssautil.AllPackages(initial, ssa.InstantiateGenerics)
	prog.Build()
	return pkgs[0]
}

// exportedRoots is package tokenizer's init, its exported functions and
// the exported methods of its named types (an exported method of an
// unexported type is reachable through an interface).
func exportedRoots(pkg *ssa.Package) []*ssa.Function {
	roots := []*ssa.Function{pkg.Func("init")}
	for _, m := range pkg.Members {
		switch m := m.(type) {
		case *ssa.Function:
			if token.IsExported(m.Name()) {
				roots = append(roots, m)
			}
		case *ssa.Type:
			roots = append(roots, exportedMethods(pkg.Prog, m)...)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].String() < roots[j].String() })
	return roots
}

// exportedMethods is the exported methods of T and *T.
func exportedMethods(prog *ssa.Program, typ *ssa.Type) []*ssa.Function {
	var fns []*ssa.Function
	for _, t := range []types.Type{typ.Type(), types.NewPointer(typ.Type())} {
		mset := prog.MethodSets.MethodSet(t)
		for i := 0; i < mset.Len(); i++ {
			sel := mset.At(i)
			if !sel.Obj().Exported() {
				continue
			}
			if fn := prog.MethodValue(sel); fn != nil {
				fns = append(fns, fn)
			}
		}
	}
	return fns
}

// fatalCall is one reachable fatal call: where, what, and a path to it.
type fatalCall struct {
	fn, pos, call, path string
}

// reachableFatal walks the call graph breadth-first from roots through
// fatalScope's functions, stopping at recover boundaries, and reports the
// fatal calls in the functions it reaches, each with the path by which
// the walk first reached its function.
func reachableFatal(cg *callgraph.Graph, roots []*ssa.Function) []fatalCall {
	from := map[*ssa.Function]*ssa.Function{}
	var queue []*ssa.Function
	for _, r := range roots {
		if _, seen := from[r]; !seen && !isBoundary(r) {
			from[r] = nil
			queue = append(queue, r)
		}
	}
	var found []fatalCall
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		found = append(found, fatalCalls(fn, from)...)
		for _, next := range callees(cg, fn) {
			if _, seen := from[next]; seen || !inScope(next) || isBoundary(next) {
				continue
			}
			from[next] = fn
			queue = append(queue, next)
		}
	}
	return found
}

// callees is fn's callees in the call graph, and the functions fn takes
// as values (a closure handed to sort.Slice is called from the standard
// library, which the walk does not enter).
func callees(cg *callgraph.Graph, fn *ssa.Function) []*ssa.Function {
	var out []*ssa.Function
	if node := cg.Nodes[fn]; node != nil {
		for _, e := range node.Out {
			out = append(out, e.Callee.Func)
		}
	}
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			var ops [8]*ssa.Value
			for _, op := range instr.Operands(ops[:0]) {
				if f, ok := (*op).(*ssa.Function); ok {
					out = append(out, f)
				}
			}
		}
	}
	return append(out, fn.AnonFuncs...)
}

// inScope says whether fn is fatalScope's code; a wrapper or an
// instantiation belongs to the package of the function it stands for.
func inScope(fn *ssa.Function) bool {
	path := ""
	switch {
	case fn.Pkg != nil:
		path = fn.Pkg.Pkg.Path()
	case fn.Object() != nil && fn.Object().Pkg() != nil:
		path = fn.Object().Pkg().Path()
	case fn.Origin() != nil && fn.Origin().Pkg != nil:
		path = fn.Origin().Pkg.Pkg.Path()
	}
	for _, p := range fatalScope {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// isBoundary says whether fn defers a function that calls recover().
func isBoundary(fn *ssa.Function) bool {
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			d, ok := instr.(*ssa.Defer)
			if !ok {
				continue
			}
			if callee := d.Call.StaticCallee(); callee != nil && callsRecover(callee) {
				return true
			}
		}
	}
	return false
}

// callsRecover says whether fn calls the builtin recover directly.
func callsRecover(fn *ssa.Function) bool {
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			if c, ok := instr.(ssa.CallInstruction); ok {
				if bi, ok := c.Common().Value.(*ssa.Builtin); ok && bi.Name() == "recover" {
					return true
				}
			}
		}
	}
	return false
}

// fatalCalls is fn's calls to the builtin panic and to fatalFuncs, each
// with the path from a root to fn that from records.
func fatalCalls(fn *ssa.Function, from map[*ssa.Function]*ssa.Function) []fatalCall {
	var found []fatalCall
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			if name := fatalName(instr); name != "" {
				pos := fn.Prog.Fset.Position(instr.Pos())
				found = append(found, fatalCall{fn: fn.String(), pos: pos.String(), call: name, path: pathTo(fn, from)})
			}
		}
	}
	return found
}

// fatalName names the fatal call instr makes, or is "". SSA makes an
// explicit panic(x) a Panic instruction, not a call.
func fatalName(instr ssa.Instruction) string {
	if p, ok := instr.(*ssa.Panic); ok && p.Pos().IsValid() {
		return "panic"
	}
	c, ok := instr.(ssa.CallInstruction)
	if !ok {
		return ""
	}
	callee := c.Common().StaticCallee()
	if callee == nil || callee.Object() == nil || callee.Object().Pkg() == nil {
		return ""
	}
	pkg := callee.Object().Pkg().Path()
	if fatalFuncs[pkg][callee.Name()] {
		return pkg + "." + callee.Name()
	}
	return ""
}

// pathTo is the chain of calls from a root to fn, root first.
func pathTo(fn *ssa.Function, from map[*ssa.Function]*ssa.Function) string {
	var chain []string
	for f := fn; f != nil; f = from[f] {
		chain = append(chain, f.String())
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return strings.Join(chain, " -> ")
}
