package sdk

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rootNames are the sdk root's exported names: the adapter author's
// contract. Adding one is a deliberate act, frozen by the next sdk tag;
// the host's side belongs in package pluginhost.
var rootNames = []string{
	"AdapterInfo", "Availability", "Availability.String", "AvailabilityUnknown", "CapEmbed",
	"Capabilities", "CheckCapabilities", "Chunk", "ContextErr",
	"DefaultBusyTimeout", "DefaultHealthFailures", "DefaultHealthInterval", "DefaultHealthTimeout", "DefaultRetryMax", "DefaultStartupDeadline",
	"Draining", "DurationStrings", "EmbedRequest", "EmbedResult", "Embedder", "Engine", "ErrAlreadyStarted", "ErrInvalidArgument", "ErrNotStarted",
	"ErrPluginExited", "ErrStartupDeadline", "ErrUnavailable", "ErrUnimplemented", "Event",
	"FieldEngineAddr", "FieldError", "FieldError.Error", "FieldError.Unwrap",
	"FieldHealthConfirm", "FieldHealthFailures", "FieldHealthInterval", "FieldHealthRetryMax", "FieldHealthTimeout",
	"FieldOptions", "FieldStartupDeadline",
	"FinishCancelled", "FinishError", "FinishLength", "FinishReason", "FinishReason.String", "FinishStop", "FinishUnknown",
	"GenerateRequest", "Generator", "HealthPolicy", "HealthPolicy.Validate", "HealthPolicy.WithDefaults",
	"Logger", "Logprob", "Logprobs", "Lost", "MaxLogLine", "NotReady", "ReasonStreamEnded", "Result",
	"Serve", "ServeOption", "Serving", "StartRequest",
	"StructuredChoice", "StructuredGrammar", "StructuredJSONObject", "StructuredJSONSchema", "StructuredKind",
	"StructuredNone", "StructuredOutput", "StructuredRegex", "StructuredTag",
	"TestPluginEngine", "TokenLogprob",
	"WithLogger", "WithParentWatch", "WithTestConfig", "Worker",
}

// TestRootNames: the sdk root exports rootNames and nothing else.
func TestRootNames(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/vigilhq/vigil/sdk")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			got = append(got, v.Names...)
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			got = append(got, prefix+f.Name)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs("", p.Funcs)
	for _, typ := range p.Types {
		got = append(got, typ.Name)
		values(typ.Consts)
		values(typ.Vars)
		funcs("", typ.Funcs)
		funcs(typ.Name+".", typ.Methods)
	}
	got = slices.DeleteFunc(got, func(n string) bool { return !ast.IsExported(n[strings.LastIndex(n, ".")+1:]) })
	slices.Sort(got)
	want := slices.Sorted(slices.Values(rootNames))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the sdk root's exported names changed (-want +got); update rootNames deliberately:\n%s", diff)
	}
}
