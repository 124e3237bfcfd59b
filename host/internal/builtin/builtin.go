// Package builtin holds the engine adapters that ship inside the vigil
// binary, and runs one of them when vigil re-executes itself as an adapter
// subprocess.
package builtin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"

	"github.com/vigilhq/vigil/plugins/sglang"
	"github.com/vigilhq/vigil/plugins/trtllm"
	"github.com/vigilhq/vigil/plugins/vllm"
	"github.com/vigilhq/vigil/sdk"
)

// envAdapter tells a re-executed vigil which built-in adapter to serve.
const envAdapter = "VIGIL_BUILTIN_ADAPTER"

var adapters = map[string]func() sdk.Engine{
	sglang.Name: func() sdk.Engine { return sglang.New() },
	trtllm.Name: func() sdk.Engine { return trtllm.New() },
	vllm.Name:   func() sdk.Engine { return vllm.New() },
}

// Names lists the built-in engine names, sorted.
func Names() []string {
	names := make([]string, 0, len(adapters))
	for n := range adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether name is a built-in engine.
func Has(name string) bool { _, ok := adapters[name]; return ok }

// Command returns the command that runs the built-in adapter name as a
// subprocess: this same executable, with the environment env and the
// variable that tells it to serve the adapter. The process is killed when
// ctx ends, as with exec.CommandContext.
func Command(ctx context.Context, name string, env []string) (*exec.Cmd, error) {
	if !Has(name) {
		return nil, fmt.Errorf("no built-in engine %q", name)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the vigil executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(slices.Clip(env), envAdapter+"="+name)
	return cmd, nil
}

// ServeIfAdapter serves a built-in adapter and returns true when this
// process was started as one; main calls it before anything else so that
// nothing reaches stdout ahead of the go-plugin handshake.
func ServeIfAdapter() bool {
	name := os.Getenv(envAdapter)
	if name == "" {
		return false
	}
	newEngine, ok := adapters[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "vigil: %s=%q: no such built-in engine\n", envAdapter, name)
		os.Exit(1)
	}
	sdk.Serve(newEngine())
	return true
}

// CheckOptions checks engine options for the built-in engine name in
// process, as its adapter's Start would before dialling the engine: an
// unknown key or a bad value is an *sdk.FieldError for sdk.FieldOptions.
// A value that only the engine can judge passes.
func CheckOptions(name string, options map[string]string) error {
	newEngine, ok := adapters[name]
	if !ok {
		return fmt.Errorf("no built-in engine %q", name)
	}
	if c, ok := newEngine().(interface {
		CheckOptions(map[string]string) error
	}); ok {
		return c.CheckOptions(options)
	}
	return nil
}
