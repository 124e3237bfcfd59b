package command

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/host/internal/adapter"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// pluginDir is a plugin directory holding executables for the engines
// named, each a script of its own content, and a SHA256SUMS of sums when
// sums is not nil. It returns the directory and each file's SHA-256.
func pluginDir(t *testing.T, engines []string, sums func(got map[string]string) string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	got := map[string]string{}
	for _, e := range engines {
		path := filepath.Join(dir, adapter.FilePrefix+e)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n# "+e+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		sum, err := adapter.Sum(path)
		if err != nil {
			t.Fatal(err)
		}
		got[adapter.FilePrefix+e] = sum
	}
	if sums != nil {
		if err := os.WriteFile(filepath.Join(dir, adapter.SumsFile), []byte(sums(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, got
}

func TestFindAdapter(t *testing.T) {
	t.Parallel()
	plain, plainSums := pluginDir(t, []string{"toy", "vllm"}, nil)
	pinned, pinnedSums := pluginDir(t, []string{"toy", "other", "wrong"}, func(got map[string]string) string {
		return got["vigil-adapter-toy"] + "  vigil-adapter-toy\n" + strings.Repeat("0", 64) + "  vigil-adapter-wrong\n"
	})
	toy, pinnedToy := filepath.Join(plain, "vigil-adapter-toy"), filepath.Join(pinned, "vigil-adapter-toy")
	for _, tc := range []struct {
		name, engine, plugin string
		a                    adapterConfig
		want                 adapterSource // compared: engine, path, fromDir, sum, shadowed
		err                  string
	}{
		{"built in", "vllm", "", adapterConfig{dir: "/nonexistent"}, adapterSource{engine: "vllm"}, ""},
		{"built in shadows the directory's", "vllm", "", adapterConfig{dir: plain},
			adapterSource{engine: "vllm", shadowed: filepath.Join(plain, "vigil-adapter-vllm")}, ""},
		{"built in, pinned", "vllm", "", adapterConfig{dir: plain, sha256: plainSums["vigil-adapter-vllm"]}, adapterSource{},
			"--engine-plugin-sha256: pins a third-party adapter, and --engine vllm is built into vigil"},
		{"from the directory", "toy", "", adapterConfig{dir: plain},
			adapterSource{engine: "toy", path: toy, fromDir: true, sum: plainSums["vigil-adapter-toy"]}, ""},
		{"in no directory", "toy", "", adapterConfig{dir: "/nonexistent"}, adapterSource{},
			`--engine "toy": unknown engine; built-in engines: sglang, trtllm, vllm, and --plugin-dir "/nonexistent" has no vigil-adapter-toy`},
		{"named by path", "", toy, adapterConfig{dir: "/nonexistent"},
			adapterSource{path: toy, sum: plainSums["vigil-adapter-toy"]}, ""},
		{"named by path shadows nothing", "vllm", filepath.Join(plain, "vigil-adapter-vllm"), adapterConfig{dir: plain},
			adapterSource{engine: "vllm", path: filepath.Join(plain, "vigil-adapter-vllm"), sum: plainSums["vigil-adapter-vllm"]}, ""},
		{"named by path, missing", "", "/no/such/adapter", adapterConfig{}, adapterSource{}, `--engine-plugin "/no/such/adapter": not an executable file`},
		{"pinned by flag", "", toy, adapterConfig{sha256: plainSums["vigil-adapter-toy"]},
			adapterSource{path: toy, sum: plainSums["vigil-adapter-toy"]}, ""},
		{"pin by flag mismatch", "", toy, adapterConfig{sha256: strings.Repeat("a", 64)}, adapterSource{},
			"--engine-plugin-sha256: " + toy + " has SHA-256 " + plainSums["vigil-adapter-toy"] + ", want " + strings.Repeat("a", 64)},
		{"listed in SHA256SUMS", "toy", "", adapterConfig{dir: pinned},
			adapterSource{engine: "toy", path: pinnedToy, fromDir: true, sum: pinnedSums["vigil-adapter-toy"]}, ""},
		{"listed, by path too", "", pinnedToy, adapterConfig{dir: pinned},
			adapterSource{path: pinnedToy, sum: pinnedSums["vigil-adapter-toy"]}, ""},
		{"not listed in SHA256SUMS", "other", "", adapterConfig{dir: pinned}, adapterSource{},
			"SHA256SUMS does not list vigil-adapter-other"},
		{"SHA256SUMS mismatch", "wrong", "", adapterConfig{dir: pinned}, adapterSource{},
			"has SHA-256 " + pinnedSums["vigil-adapter-wrong"] + ", want " + strings.Repeat("0", 64) + " (from SHA256SUMS)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := findAdapter(tc.engine, tc.plugin, tc.a)
			if tc.err != "" {
				if !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("findAdapter() error = %v, want a configuration error holding %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("findAdapter() error = %v", err)
			}
			got.label = ""
			if got != tc.want {
				t.Errorf("findAdapter() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An adapter must report the engine asked for, and a name discovery can
// publish; a configuration error says which flag to change.
func TestCheckName(t *testing.T) {
	t.Parallel()
	byPath := adapterSource{path: "/x/a", label: `--engine-plugin "/x/a"`}
	fromDir := adapterSource{engine: "toy", path: "/d/vigil-adapter-toy", label: `--engine "toy" (/d/vigil-adapter-toy)`, fromDir: true}
	for _, tc := range []struct {
		name string
		src  adapterSource
		info string
		err  string
	}{
		{"any name by path", byPath, "toy", ""},
		{"asked and reported", withEngine(byPath, "toy"), "toy", ""},
		{"asked, another reported", withEngine(byPath, "toy"), "vllm",
			`--engine "toy": the adapter /x/a reports the engine "vllm"; leave --engine out`},
		{"directory's, another reported", fromDir, "vllm", `vigil-adapter-toy in a plugin directory must be the adapter of toy`},
		{"unpublishable", byPath, "a/b", `reports the engine name "a/b", which discovery cannot publish`},
		{"empty", byPath, "", `reports the engine name ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.src.checkName(sdk.AdapterInfo{Name: tc.info})
			if tc.err == "" {
				if err != nil {
					t.Errorf("checkName(%q) = %v, want nil", tc.info, err)
				}
				return
			}
			if !errors.Is(err, outcome.ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("checkName(%q) = %v, want a configuration error holding %q", tc.info, err, tc.err)
			}
		})
	}
}

func withEngine(s adapterSource, engine string) adapterSource { s.engine = engine; return s }

// --engine defaults to vllm, and to the adapter's own name with
// --engine-plugin.
func TestEngineDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"built-in default", nil, "vllm"},
		{"plugin's name", []string{"--engine-plugin", "/bin/true"}, ""},
		{"plugin, engine given", []string{"--engine-plugin", "/bin/true", "--engine", "toy"}, "toy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseRunArgs(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.engine != tc.want {
				t.Errorf("engine = %q, want %q", cfg.engine, tc.want)
			}
		})
	}
}

func TestPluginCheckRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no path", nil, "plugin check takes one argument, the adapter executable's PATH; got 0"},
		{"two paths", []string{"/bin/true", "/bin/false"}, "got 2"},
		{"missing", []string{"/no/such"}, `plugin check "/no/such": not an executable file`},
		{"option without engine", []string{"--engine-option", "a=b", "/bin/true"}, "--engine-option: needs --engine-addr"},
		{"conformance without engine", []string{"--conformance", "/bin/true"}, "--conformance: needs --engine-addr"},
		{"engine address", []string{"--engine-addr", "x", "/bin/true"}, `--engine-addr "x": want host:port`},
		{"reserved variable", []string{"--plugin-env", "CONSUL_HTTP_TOKEN", "/bin/true"}, "never passed to an adapter"},
		{"not a plugin", []string{"/bin/true"}, "not a vigil engine adapter: it exited before the plugin handshake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runArgs(t, append([]string{"plugin", "check"}, tc.args...)...)
			if code != ExitConfig || !strings.Contains(out, tc.want) {
				t.Errorf("exit code %d, output %q; want %d holding %q", code, out, ExitConfig, tc.want)
			}
		})
	}
}
