package main

import (
	"os/exec"
	"strings"
	"testing"
)

// enginePkgs are the toy engine's packages, which an adapter's module
// copied from this one drops: the engine is someone else's program.
var enginePkgs = []string{
	"github.com/vigilhq/vigil/examples/adapter/engine",
	"github.com/vigilhq/vigil/examples/adapter/cmd/toy-engine",
}

// TestEngineDroppable: no package of the module but the engine's own
// imports the engine, tests included, so that dropping engine and
// cmd/toy-engine from a copy, as the README says, breaks nothing.
func TestEngineDroppable(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "github.com/vigilhq/vigil/examples/adapter/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), " ")
		if isEngine(pkg) {
			continue
		}
		for _, dep := range strings.Fields(deps) {
			if dep == enginePkgs[0] {
				t.Errorf("%s imports %s, want only the engine's own packages to: a copy of the module drops it", pkg, dep)
			}
		}
	}
}

// isEngine reports whether pkg, or its test variant, is the engine's.
func isEngine(pkg string) bool {
	for _, p := range enginePkgs {
		if pkg == p || strings.HasPrefix(pkg, p+" ") || strings.HasPrefix(pkg, p+".test") || strings.HasPrefix(pkg, p+"_test") {
			return true
		}
	}
	return false
}
