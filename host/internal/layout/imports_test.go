package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Import paths in the table are short: a host/internal package by its path
// below host/internal ("discovery/file"), another vigil module's package by
// "vigil/" and its path below the repository ("vigil/sdk"), anything else in
// full. "p/..." matches p and every package below it, as in go list.
const (
	internalPrefix = "github.com/vigilhq/vigil/host/internal/"
	vigilPrefix    = "github.com/vigilhq/vigil/"
)

// rule is one host/internal package: who it is for, what it does, and
// what its non-test files may import. Standard library packages and the
// unrestricted third-party ones (grpc, protobuf, genproto, hclog) are not
// listed; every vigil package and every family in exclusive is.
type rule struct {
	audience, job string
	may           []string
}

// rules is every host/internal package. A package missing here, or a row
// for a package that is gone, fails the test. Coming rows: a Kubernetes
// backend, discovery/kubernetes, would be a row like discovery/consul's
// (discovery, k8s.io/...), imported by command alone.
var rules = map[string]rule{
	"adapter": {"command (vigil run, vigil plugin)", "where a plugin directory keeps an engine's adapter, its SHA-256 pins, the adapter's environment", nil},
	"builtin": {"the adapter subprocess", "the adapters built into the binary, run when vigil re-executes itself",
		[]string{"vigil/plugins/...", "vigil/sdk"}},
	"command": {"the operator (the command line)", "flags, their validation, exit codes; wires the others together",
		[]string{"adapter", "builtin", "discovery", "discovery/consul", "discovery/file", "endpoint", "logwriter", "metrics",
			"outcome", "outparse", "router", "supervisor", "textgen", "tlsconfig", "tokenizer", "workerapi", "vigil/sdk", "vigil/sdk/pluginhost",
			"vigil/sdk/sdktest", "github.com/hashicorp/consul/...", "github.com/urfave/cli/..."}},
	"discovery": {"every registry user", "the contract: Registration, its metadata, Registry, Discoverer, Announcer", nil},
	"discovery/consul": {"command", "the Consul backend, both halves",
		[]string{"discovery", "github.com/hashicorp/consul/..."}},
	"discovery/discoverytest": {"tests of backends", "running a Discoverer for a test and reading its sets", []string{"discovery"}},
	"discovery/file":          {"command", "the file backend, both halves", []string{"discovery"}},
	// endpoint decides what the worker accepts (discovery.Capabilities),
	// which its registration publishes and the router matches.
	"endpoint": {"a worker's clients (vigil route, SDKs)", "vigil run's worker API: admission, drain, health, what the worker accepts",
		[]string{"discovery", "workerapi", "vigil/proto/vigil/worker/v1", "vigil/sdk", "vigil/sdk/pluginhost"}},
	"jinja":     {"tokenizer", "Jinja templates rendered as Python's jinja2 in transformers' sandbox", nil},
	"layout":    {"the project", "this table", nil},
	"logwriter": {"vigil's log", "a log output that never holds vigil up", nil},
	"metrics": {"Prometheus", "the metrics of vigil run and vigil route, and their listener",
		[]string{"discovery", "endpoint", "router", "supervisor", "vigil/sdk", "github.com/prometheus/..."}},
	"outcome": {"command", "why a lifecycle ended, for the exit code", nil},
	"router": {"the router's clients (gRPC and OpenAI HTTP)", "vigil route: the pool of workers, balancing, retries, the OpenAI API",
		[]string{"discovery", "outcome", "tlsconfig", "workerapi", "vigil/proto/vigil/worker/v1"}},
	"stopstring": {"textgen", "stop strings matched on streamed text", nil},
	"outparse":   {"textgen", "reasoning and tool calls parsed out of streamed output text", nil},
	"textgen": {"command", "the worker's tokenization, a wrapper around the engine: prompts encoded and rendered, output detokenized, stop strings, the default max_tokens",
		[]string{"outparse", "stopstring", "tokenizer", "workerapi", "vigil/proto/vigil/worker/v1", "vigil/sdk"}},
	"supervisor": {"vigil run", "the lifecycle: adapter, engine, registration, drain",
		[]string{"discovery", "outcome", "vigil/sdk", "vigil/sdk/healthwatch", "vigil/sdk/pluginhost"}},
	"tlsconfig":         {"command; the router, to name TLS failures", "TLS configurations from PEM files, reloaded when they change; what a TLS failure was", nil},
	"tlsconfig/tlstest": {"tests", "certificates for tests", nil},
	"tokenizer": {"textgen", "a model's own tokenizer and chat template",
		[]string{"jinja", "vigil/tokenizer"}},
	"workerapi": {"endpoint and router", "the vigil.worker.v1 facts both sides agree on: limits, names, reasons, options", nil},
}

// exclusive names the packages that alone may import a family; a row
// allowing a family it is not named for fails, so these rules cannot be
// loosened by editing a row alone. A third-party family listed here must
// also be in the importing package's row.
var exclusive = map[string][]string{
	// The engines' adapters run only as built-ins.
	"vigil/plugins/...": {"builtin"},
	// A backend is chosen on the command line; everyone else sees the
	// registry through package discovery. A Kubernetes backend is coming.
	"discovery/consul":                {"command"},
	"discovery/file":                  {"command"},
	"discovery/kubernetes":            {"command"},
	"github.com/hashicorp/consul/...": {"discovery/consul", "command"},
	"k8s.io/...":                      {"discovery/kubernetes", "command"},
	"sigs.k8s.io/...":                 {"discovery/kubernetes", "command"},
	// Test helpers are for test files; command is for host/cmd/vigil.
	"discovery/discoverytest": nil,
	"tlsconfig/tlstest":       nil,
	"command":                 nil,
	// vigil run's parts: the router knows a worker only through workerapi,
	// and the supervisor knows no command or backend.
	"endpoint":   {"command", "metrics"},
	"supervisor": {"command", "metrics"},
	"router":     {"command", "metrics"},
	// The tokenizer: the host's package (chat templates around the
	// module's encoding and decoding) for textgen and command; the module
	// for them and the package; regexp2 is the module's, no host package's.
	"tokenizer":                      {"textgen", "command"},
	"vigil/tokenizer/...":            {"tokenizer", "textgen", "command"},
	"jinja":                          {"tokenizer"},
	"github.com/dlclark/regexp2/...": nil,
	// The sdk: its root (the author's contract and the types) for all but
	// the router; its host side for what runs and talks to adapters;
	// go-plugin only behind it.
	"vigil/sdk":            {"builtin", "command", "endpoint", "metrics", "supervisor", "textgen"},
	"vigil/sdk/pluginhost": {"command", "endpoint", "supervisor"},
	// vigil plugin check --conformance runs the author's conformance kit.
	"vigil/sdk/sdktest":                  {"command"},
	"github.com/hashicorp/go-plugin/...": nil,
	// The command line and Prometheus each have one package.
	"github.com/urfave/cli/...": {"command"},
	"github.com/prometheus/...": {"metrics"},
}

// The imports of every host/internal package's non-test files keep to its
// row. Test files are not held to it: a test may stand up the real peers
// of the code it tests (supervisor tests the file registry, metrics tests
// the Consul backend, command tests tlstest's certificates), which are no
// audience of the package's code.
func TestImports(t *testing.T) {
	t.Parallel()
	pkgs := internalImports(t)
	for name, r := range rules {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("rules has a row for %s, which has no non-test Go files: remove it", name)
		}
		for _, p := range r.may {
			if fam, who, ok := exclusiveFamily(p); ok && !slices.Contains(who, name) {
				t.Errorf("%s's row allows %s, but only %v may import %s", name, p, who, fam)
			}
		}
	}
	for name, imports := range pkgs {
		r, ok := rules[name]
		if !ok {
			t.Errorf("host/internal/%s has no row in rules: add one saying who it is for and what it may import", name)
			continue
		}
		for _, imp := range imports {
			p := short(imp.path)
			_, _, restricted := exclusiveFamily(p)
			if (restricted || strings.HasPrefix(imp.path, vigilPrefix)) && !slices.ContainsFunc(r.may, matcher(p)) {
				t.Errorf("%s imports %s, which its row does not allow (host/internal/%s is for %s: %s): "+
					"move the code to the package whose audience needs it", imp.pos, imp.path, name, r.audience, r.job)
			}
		}
	}
}

// exclusiveFamily returns the family in exclusive that p falls in, and
// the packages that may import it.
func exclusiveFamily(p string) (string, []string, bool) {
	for fam, who := range exclusive {
		if matcher(p)(fam) {
			return fam, who, true
		}
	}
	return "", nil, false
}

// matcher returns whether a pattern ("p" or "p/...") matches path.
func matcher(path string) func(pattern string) bool {
	return func(pattern string) bool {
		if base, ok := strings.CutSuffix(pattern, "/..."); ok {
			return path == base || strings.HasPrefix(path, base+"/")
		}
		return path == pattern
	}
}

// short is path as the table writes it.
func short(path string) string {
	if p, ok := strings.CutPrefix(path, internalPrefix); ok {
		return p
	}
	if p, ok := strings.CutPrefix(path, vigilPrefix); ok {
		return "vigil/" + p
	}
	return path
}

// anImport is one import of a non-test file.
type anImport struct {
	path string
	pos  token.Position
}

// internalImports returns the imports of every host/internal package's
// non-test files, by the package's path below host/internal. Every file is
// read whatever its build constraints.
func internalImports(t *testing.T) map[string][]anImport {
	t.Helper()
	root := ".."
	pkgs := map[string][]anImport{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if err == nil && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return err
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if _, ok := pkgs[name]; !ok {
			pkgs[name] = nil // a package, even with no imports
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			pkgs[name] = append(pkgs[name], anImport{path: p, pos: fset.Position(imp.Pos())})
		}
		return nil
	})
	if err != nil || len(pkgs) == 0 {
		t.Fatalf("reading host/internal: %v, %d packages", err, len(pkgs))
	}
	return pkgs
}

// docs/layout.md draws this table: it names every package in it.
func TestLayoutDocNamesEveryPackage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range rules {
		if !strings.Contains(string(b), "`"+name+"`") {
			t.Errorf("docs/layout.md does not name `%s`", name)
		}
	}
}
