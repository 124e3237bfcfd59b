package router

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The router sees discovery only through its contract (package discovery):
// no backend package, no record format, no Consul API. A router that knew a
// backend's records would break silently when the backend changes them.
func TestRouterSeesDiscoveryOnlyThroughItsContract(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/vigilhq/vigil/host/internal/discovery/", // every backend and helper below the contract
		"github.com/hashicorp/consul/",
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the router's files: %v, %d files", err, len(files))
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, prefix := range forbidden {
				if strings.HasPrefix(path, prefix) {
					t.Errorf("%s imports %s: the router must see discovery only through package discovery",
						fset.Position(imp.Pos()), path)
				}
			}
		}
	}
}
