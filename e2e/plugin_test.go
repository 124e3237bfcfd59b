package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// testAdapterBin is cmd/vigil-adapter-test, built by TestMain: vLLM's
// adapter reporting the name its file gives it, which logs in every way an
// adapter may.
var testAdapterBin string

// testAdapterPkg builds testAdapterBin.
const testAdapterPkg = "github.com/vigilhq/vigil/e2e/cmd/vigil-adapter-test"

// toyAdapterBin and toyEngineBin are the example adapter (examples/adapter)
// and its engine, built by TestMain as the example's author would.
var toyAdapterBin, toyEngineBin string

// dirAdapter is a third-party adapter that TestPluginDirAdapter installs in
// --plugin-dir as vigil-adapter-<engine> and selects with --engine
// <engine>, as an image carrying it would.
type dirAdapter struct {
	// engine is the --engine name, which the adapter must report.
	engine string
	// bin is the adapter executable (built by TestMain).
	bin func() string
	// serve starts an engine the adapter serves and returns its address.
	serve func(t *testing.T) string
}

// dirAdapters are the adapters the plugin-directory test runs, one subtest
// each: any adapter built with the sdk, with an engine of its own to
// serve, can be added as a row.
var dirAdapters = []dirAdapter{
	{
		engine: "vllm-test",
		bin:    func() string { return testAdapterBin },
		serve:  func(t *testing.T) string { return startMock(t, firstEngine(), harness.MockOpts{}).GRPC },
	},
	{
		engine: "toy",
		bin:    func() string { return toyAdapterBin },
		serve:  startToyEngine,
	},
}

// startToyEngine starts the example's toy engine on a fresh port and waits
// until it serves.
func startToyEngine(t *testing.T) string {
	t.Helper()
	addr := addr(freePort(t))
	p := startProcEnv(t, "toy-engine", nil, toyEngineBin, "--listen", addr)
	p.waitLine("serving", harness.StartTimeout)
	return addr
}

// install copies bin into dir as vigil-adapter-<engine> and returns its
// path and SHA-256.
func install(t *testing.T, dir, engine, bin string) (string, string) {
	t.Helper()
	src, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "vigil-adapter-"+engine)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// writeFile writes content to dir/name with mode and returns its path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPluginDirAdapter: --engine finds a third-party adapter in
// --plugin-dir, pinned by the directory's SHA256SUMS, and the worker is
// registered under that engine, the adapter process being the installed
// file; a SIGTERM then exits 0.
func TestPluginDirAdapter(t *testing.T) {
	skipShort(t)
	t.Parallel()
	for _, a := range dirAdapters {
		t.Run(a.engine, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path, sum := install(t, dir, a.engine, a.bin())
			writeFile(t, dir, "SHA256SUMS", sum+"  vigil-adapter-"+a.engine+"\n", 0o644)
			c := consulFor(t)
			svc := uniqueService(t)
			hv, err := harness.StartVigil(starter{t}, vigilBin, harness.VigilOpts{Engine: a.engine, EngineAddr: a.serve(t),
				Consul: c.Consul, Service: svc, Extra: []string{"--plugin-dir", dir}})
			if err != nil {
				t.Fatal(err)
			}
			v := &vigil{proc: &proc{Proc: hv.Proc, t: t}, Vigil: hv}
			entries, _ := c.passing(t, svc, 30*time.Second, count(1))
			if got := entries[0].Service.Meta["engine"]; got != a.engine {
				t.Errorf("registered engine %q, want %q", got, a.engine)
			}
			if line := v.findLine("engine adapter selected"); !strings.Contains(line, sum) || !strings.Contains(line, path) {
				t.Errorf("selection not logged with the adapter's path and SHA-256: %q", line)
			}
			if adapters := children(v.pid()); len(adapters) != 1 {
				t.Errorf("vigil has %d child processes, want the adapter alone", len(adapters))
			} else if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", adapters[0])); exe != path {
				t.Errorf("adapter process runs %q, want %q", exe, path)
			}
			v.term(t)
			if code := v.wait(exitBound); code != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0", code)
			}
		})
	}
}

// TestPluginDirSelection: a built-in engine is never shadowed by the
// plugin directory's adapter of the same name (vigil says it ignored it),
// and a directory's adapter that reports another engine is refused.
func TestPluginDirSelection(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	install(t, dir, e.Name, testAdapterBin)
	install(t, dir, "other", e.adapterBin) // reports vllm
	t.Run("built in wins", func(t *testing.T) {
		t.Parallel()
		m := startMock(t, e, harness.MockOpts{})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: t.TempDir(),
			service: uniqueService(t), extra: []string{"--plugin-dir", dir}})
		line := v.waitLine("the plugin directory's adapter is ignored", 10*time.Second)
		if !strings.Contains(line, filepath.Join(dir, "vigil-adapter-"+e.Name)) || !strings.Contains(line, "[WARN]") {
			t.Errorf("shadowed adapter not named in a warning: %q", line)
		}
		v.waitLine("engine adapter started", 30*time.Second)
		if adapters := children(v.pid()); len(adapters) != 1 {
			t.Errorf("vigil has %d child processes, want the adapter alone", len(adapters))
		} else if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", adapters[0])); exe != vigilBin {
			t.Errorf("adapter process runs %q, want vigil itself (%s)", exe, vigilBin)
		}
		v.term(t)
		v.wait(exitBound)
	})
	t.Run("reports another engine", func(t *testing.T) {
		t.Parallel()
		p := startProc(t, "vigil", vigilBin, "run", "--engine", "other", "--plugin-dir", dir, "--engine-addr", addr(freePort(t)),
			"--listen", addr(freePort(t)), "--registry-dir", t.TempDir())
		p.exits(78, 30*time.Second, `the engine adapter cannot be used`, `reports the engine \"vllm\"`)
	})
}

// TestPluginPinMismatch: an adapter whose SHA-256 is not its pin's, or one
// a pinned plugin directory does not list, starts nothing: vigil exits 78
// naming the expected and the actual digest, before any adapter process
// or registration.
func TestPluginPinMismatch(t *testing.T) {
	skipShort(t)
	t.Parallel()
	wrong := strings.Repeat("0", 64)
	pinnedDir := func(t *testing.T, sums string) (string, string) {
		dir := t.TempDir()
		_, sum := install(t, dir, "vllm-test", testAdapterBin)
		if sums != "" {
			writeFile(t, dir, "SHA256SUMS", strings.ReplaceAll(sums, "SUM", sum), 0o644)
		}
		return dir, sum
	}
	for _, tc := range []struct {
		name string
		sums string // SHA256SUMS, SUM standing for the adapter's digest
		flag string // --engine-plugin-sha256
		want []string
	}{
		{"flag", "", wrong, []string{"--engine-plugin-sha256", "want " + wrong}},
		{"SHA256SUMS", wrong + "  vigil-adapter-vllm-test\n", "", []string{"--plugin-dir", "want " + wrong, "SHA256SUMS"}},
		{"not listed", "SUM  vigil-adapter-other\n", "", []string{"--plugin-dir", "SHA256SUMS does not list vigil-adapter-vllm-test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, sum := pinnedDir(t, tc.sums)
			c := consulFor(t)
			svc := uniqueService(t)
			m := startMock(t, firstEngine(), harness.MockOpts{})
			args := []string{"run", "--engine", "vllm-test", "--plugin-dir", dir, "--engine-addr", m.GRPC, "--listen", addr(freePort(t)),
				"--discovery", "consul", "--service-name", svc}
			if tc.flag != "" {
				args = append(args, "--engine-plugin-sha256", tc.flag)
			}
			if tc.name != "not listed" {
				tc.want = append(tc.want, "has SHA-256 "+sum)
			}
			out := startProcEnv(t, "vigil", c.env(), vigilBin, args...).exits(78, 10*time.Second, tc.want...)
			if strings.Contains(out, "starting engine adapter") || strings.Contains(out, "worker endpoint listening") {
				t.Errorf("vigil started work despite the mismatch:\n%s", out)
			}
			if c.catalogHas(t, svc) {
				t.Errorf("service %s registered despite the mismatch", svc)
			}
		})
	}
}

// TestAdapterLogsAndEnvironment: what the adapter logs reaches vigil's log
// at its own level under vigil.adapter.<name>, what it writes to stdout,
// stderr and with the log package at INFO, a long line whole and an
// overlong one cut with a marker; its environment has what --plugin-env
// names and never CONSUL_HTTP_TOKEN. Without --engine, the engine is the
// name the --engine-plugin adapter reports.
func TestAdapterLogsAndEnvironment(t *testing.T) {
	skipShort(t)
	t.Parallel()
	bin, _ := install(t, t.TempDir(), "logs", testAdapterBin)
	m := startMock(t, firstEngine(), harness.MockOpts{})
	registry, svc := t.TempDir(), uniqueService(t)
	listen := addr(freePort(t))
	v := startProcEnv(t, "vigil", []string{"CONSUL_HTTP_TOKEN=secret-token", "TEST_ADAPTER_VISIBLE=1"}, vigilBin,
		"run", "--engine-plugin", bin, "--engine-addr", m.GRPC, "--listen", listen, "--worker-id", "w1",
		"--registry-dir", registry, "--service-name", svc, "--plugin-env", "TEST_ADAPTER_VISIBLE", "--log-level", "info")
	rec, _ := waitFile(t, filepath.Join(registry, svc, "w1.json"), true, 30*time.Second)
	if rec.Engine != "logs" {
		t.Errorf("registered engine %q, want the adapter's name, logs", rec.Engine)
	}
	warn := v.waitLine("test adapter warning", 10*time.Second)
	if !strings.Contains(warn, "[WARN]  vigil.adapter.logs: test adapter warning") {
		t.Errorf("the adapter's warning is not at WARN under vigil.adapter.logs: %q", warn)
	}
	if !strings.Contains(warn, "consul_http_token_set=false") || strings.Contains(warn, "CONSUL_") || strings.Contains(warn, "secret-token") {
		t.Errorf("the adapter's environment holds vigil's Consul variables: %q", warn)
	}
	for _, name := range []string{"TEST_ADAPTER_VISIBLE", "PATH", "VIGIL_PLUGIN_LOG_LEVEL"} {
		if !strings.Contains(warn, name) {
			t.Errorf("the adapter's environment lacks %s: %q", name, warn)
		}
	}
	for substr, want := range map[string]string{
		"test adapter stdout line":      "[INFO]  vigil.adapter.logs: test adapter stdout line: stream=stdout",
		"test adapter stderr line":      "[INFO]  vigil.adapter.logs: test adapter stderr line: stream=stderr",
		"test adapter log package line": "[INFO]  vigil.adapter.logs: test adapter log package line",
		"test adapter long line":        "payload=" + strings.Repeat("x", 100<<10) + " ",
		"test adapter overlong line":    "…[cut ",
	} {
		if line := v.waitLine(substr, 10*time.Second); !strings.Contains(line, want) {
			t.Errorf("line %.120q... does not hold %.120q", line, want)
		}
	}
	if strings.Contains(v.output(), "test adapter debug line") {
		t.Error("the adapter's DEBUG line reached vigil's log at --log-level info")
	}
	v.signal(syscall.SIGTERM)
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// TestNotAnAdapter: an executable that is no adapter of this vigil's exits
// 78 saying what is wrong; one that never completes the handshake exits 1
// after --plugin-start-timeout.
func TestNotAnAdapter(t *testing.T) {
	skipShort(t)
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		bin   string
		extra []string // flags; TEST_ADAPTER_MODE is set to mode
		mode  string
		code  int
		want  string
	}{
		{"exits at once", "/bin/true", nil, "", 78, "not a vigil engine adapter: it exited before the plugin handshake"},
		{"prints garbage", writeFile(t, dir, "garbage", "#!/bin/sh\necho hello world\n", 0o755), nil, "", 78,
			`not a vigil engine adapter: it wrote \"hello world\"`},
		{"newer protocol", testAdapterBin, []string{"--plugin-env", "TEST_ADAPTER_MODE"}, "protocol-2", 78,
			"plugin protocol version mismatch: the adapter speaks vigil.plugin protocol 2, this host [1]: upgrade vigil"},
		{"claims Generate without it", testAdapterBin, []string{"--plugin-env", "TEST_ADAPTER_MODE"}, "claims-generate", 78,
			"claims Generate and Abort but does not implement sdk.Generator"},
		{"never shakes hands", writeFile(t, dir, "silent", "#!/bin/sh\nexec sleep 60\n", 0o755),
			[]string{"--plugin-start-timeout", "1s"}, "", 1, "did not complete the plugin handshake in time: no handshake within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--engine-plugin", tc.bin, "--engine-addr", addr(freePort(t)),
				"--listen", addr(freePort(t)), "--registry-dir", t.TempDir()}, tc.extra...)
			startProcEnv(t, "vigil", []string{"TEST_ADAPTER_MODE=" + tc.mode}, vigilBin, args...).exits(tc.code, 30*time.Second, tc.want)
		})
	}
}

// TestPluginCheck: vigil plugin check completes the handshake and prints
// what the adapter is, and with --engine-addr starts it against the engine
// and prints the worker and the first event; a non-adapter exits 78.
func TestPluginCheck(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	m := startMock(t, e, harness.MockOpts{})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"handshake", []string{e.adapterBin}, 0,
			[]string{"name          vllm", "protocol      1", "capabilities  readiness, generate, abort", "sha256        "}},
		{"live engine", []string{"--engine-addr", m.GRPC, e.adapterBin}, 0,
			[]string{"name          vllm", "worker        model=" + e.servedModel, "first event   SERVING"}},
		{"rejected option", []string{"--engine-addr", m.GRPC, "--engine-option", "nope=1", e.adapterBin}, 78,
			[]string{"--engine-option", "nope"}},
		{"not an adapter", []string{"/bin/true"}, 78, []string{"not a vigil engine adapter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			startProc(t, "vigil plugin check", vigilBin, append([]string{"plugin", "check"}, tc.args...)...).exits(tc.code, 30*time.Second, tc.want...)
		})
	}
}
