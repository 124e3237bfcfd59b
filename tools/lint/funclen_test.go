// Package lint holds the repository's checks that go vet and staticcheck
// do not make; `make lint` runs them.
package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function may span, from `func` to its
// closing brace.
const maxFuncLines = 60

// TestFunctionLength holds every function of every module in the
// repository (each go.mod's tree, tools and examples included) to
// maxFuncLines, test files and generated code excepted. A function
// literal counts as part of the function it is written in; one outside
// any function (a package-level variable's value) counts on its own.
func TestFunctionLength(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	files, modules := goFiles(t, root)
	if modules < 10 || len(files) < 100 {
		t.Fatalf("walked %d modules and %d files under %s: too few, is the walk wrong?", modules, len(files), root)
	}
	for _, path := range files {
		for _, f := range longFuncs(t, root, path) {
			t.Errorf("%s: %s is %d lines, more than %d: split it", f.pos, f.name, f.lines, maxFuncLines)
		}
	}
}

// goFiles lists the non-test Go files under root that the go command
// builds (it skips testdata and directories starting with . or _), and
// counts the modules they belong to.
func goFiles(t *testing.T, root string) (files []string, modules int) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case name == "go.mod":
			modules++
		case strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasSuffix(name, ".pb.go"):
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, modules
}

// longFunc is a function over the limit.
type longFunc struct {
	pos   string // file:line of its func keyword, relative to the root
	name  string
	lines int
}

// longFuncs parses path and returns its functions over maxFuncLines; a
// generated file (the "Code generated ... DO NOT EDIT." header) has none.
func longFuncs(t *testing.T, root, path string) []longFunc {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if ast.IsGenerated(file) {
		return nil
	}
	rel, _ := filepath.Rel(root, path)
	var long []longFunc
	check := func(n ast.Node, name string) {
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > maxFuncLines {
			long = append(long, longFunc{fmt.Sprintf("%s:%d", rel, start.Line), name, lines})
		}
	}
	for _, decl := range file.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok {
			check(fn, funcName(fn))
			continue
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				check(lit, "function literal")
				return false
			}
			return true
		})
	}
	return long
}

// funcName is fn's name as a reader finds it: Name, or Type.Name for a
// method (*Type.Name for a pointer receiver).
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		star, typ = "*", s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr: // a generic receiver, T[P]
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return fmt.Sprintf("(%s%s).%s", star, id.Name, fn.Name.Name)
	}
	return fn.Name.Name
}

// The check itself: a function one line over is caught by name, as is a
// package-level function literal; a function at the limit, a literal
// inside a function, and a generated file are not.
func TestLongFuncs(t *testing.T) {
	// body is the statements of a function of lines lines, braces included.
	body := func(lines int) string { return strings.Repeat("\t_ = 0\n", lines-2) }
	src := "package p\n\ntype T struct{}\n\n" +
		"func (*T) Over() {\n" + body(maxFuncLines+1) + "}\n\n" +
		"func AtLimit() {\n\tf := func() {\n" + body(maxFuncLines-3) + "\t}\n\tf()\n}\n\n" +
		"var lit = func() {\n" + body(maxFuncLines+1) + "}\n"
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	got := longFuncs(t, dir, write("p.go", src))
	litLine := strings.Count(src[:strings.Index(src, "var lit")], "\n") + 1
	want := []longFunc{{"p.go:5", "(*T).Over", maxFuncLines + 1}, {fmt.Sprintf("p.go:%d", litLine), "function literal", maxFuncLines + 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("longFuncs = %v, want %v", got, want)
	}
	if got := longFuncs(t, dir, write("gen.go", "// Code generated by x. DO NOT EDIT.\n\n"+src)); got != nil {
		t.Errorf("longFuncs of a generated file = %v, want none", got)
	}
}
