package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// dryRun runs the CLI in-process and returns its exit code, stdout and
// stderr apart: the resolved configuration alone goes to stdout.
func dryRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := App(&out, &errOut).Run(append([]string{"vigil"}, args...))
	var ec cli.ExitCoder
	switch {
	case err == nil:
	case errors.As(err, &ec):
		code = ec.ExitCode()
		errOut.WriteString(err.Error())
	default:
		code = ExitConfig
		errOut.WriteString(err.Error())
	}
	return code, out.String(), errOut.String()
}

// busyAddr returns a loopback address this test listens on until it ends:
// a command that listened there would fail.
func busyAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return lis.Addr().String()
}

// markerAdapter is an adapter executable that, if ever started, creates
// its marker file and exits; it returns the executable and the marker.
func markerAdapter(t *testing.T) (exe, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "started")
	exe = filepath.Join(dir, "vigil-adapter-toy")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\ntouch '"+marker+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, marker
}

// thirdPartyAdapter is a third-party adapter executable (the test binary
// serving the built-in vLLM adapter) that creates its marker file when
// started; it returns the executable and the marker.
func thirdPartyAdapter(t *testing.T) (exe, marker string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker = filepath.Join(dir, "started")
	exe = filepath.Join(dir, "vigil-adapter-vllm")
	script := "#!/bin/sh\ntouch '" + marker + "'\nVIGIL_BUILTIN_ADAPTER=vllm exec '" + self + "'\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, marker
}

// vigil run --dry-run validates as a start would, prints every setting
// with its effective value (flag, environment or default) and what vigil
// works out (worker id, advertised address, shutdown budget), exits 0, and
// starts no listener and no registration; a third-party adapter is
// started for its handshake and Info only (its options only its Start
// can judge).
func TestRunDryRun(t *testing.T) {
	listen := busyAddr(t)
	exe, marker := thirdPartyAdapter(t)
	reg := t.TempDir()
	t.Setenv("VIGIL_GRACE_PERIOD", "30s")
	t.Setenv("NOMAD_ALLOC_ID", "")
	code, stdout, stderr := dryRun(t, "run", "--dry-run", "--engine-plugin", exe, "--listen", listen,
		"--registry-dir", reg, "--shutdown-delay", "5s", "--engine-option", "a=b", "--log-format", "json")
	if code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(listen)
	for key, want := range map[string]any{
		"grace-period":    "30s", // from the environment
		"shutdown-delay":  "5s",  // from the flag
		"check-ttl":       "5s",  // the default
		"max-inflight":    1024.0,
		"engine-option":   []any{"a=b"},
		"plugin-env":      []any{},
		"engine":          "", // the name the adapter reports
		"engine-plugin":   exe,
		"adapter":         exe,
		"worker-id":       host + "-127.0.0.1-" + port,
		"advertise-addr":  listen,
		"registry":        "file " + reg,
		"shutdown-budget": "37s",
		"drain-timeout":   "5m0s", // the default
		"stall-timeout":   "10s",
		// --drain-timeout + 2s, from the engine's drain.
		"engine-drain-budget": "5m2s",
		"deregister-after":    "1m0s",
	} {
		if g, ok := got[key]; !ok || !jsonEqual(g, want) {
			t.Errorf("%s = %#v (present %v), want %#v", key, g, ok, want)
		}
	}
	if s, _ := got["adapter-sha256"].(string); len(s) != 64 {
		t.Errorf("adapter-sha256 = %q, want the executable's SHA-256", s)
	}
	for _, f := range runCommand().Flags {
		if name := f.Names()[0]; name != "dry-run" {
			if _, ok := got[name]; !ok {
				t.Errorf("flag --%s missing from the resolved configuration", name)
			}
		}
	}
	if _, ok := got["dry-run"]; ok {
		t.Error("the resolved configuration lists --dry-run itself")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the third-party adapter was not started for its handshake")
	}
	if left, _ := filepath.Glob(filepath.Join(reg, "*", "*")); len(left) > 0 {
		t.Errorf("the registry holds %v after a dry run", left)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A configuration error is found as a start would find it: exit 78
// naming the flag, nothing on stdout, nothing started.
func TestRunDryRunConfigError(t *testing.T) {
	exe, marker := markerAdapter(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flag", []string{"--grace-period", "-1s"}, "--grace-period -1s"},
		{"registry not writable", []string{"--registry-dir", "/dev/null"}, `--registry-dir "/dev/null": cannot write`},
		{"adapter pin", []string{"--engine-plugin-sha256", strings.Repeat("0", 64)}, "--engine-plugin-sha256: " + exe},
		{"unknown engine", []string{"--engine-plugin", "", "--engine", "tgi"}, `--engine "tgi": unknown engine`},
		{"wildcard listen", []string{"--listen", "0.0.0.0:8470"}, "--listen \"0.0.0.0:8470\" is a wildcard address"},
		{"no tokenizer.json", []string{"--tokenizer-dir", os.TempDir()}, `--tokenizer-dir "` + os.TempDir() + `": want a directory holding the model's tokenizer.json`},
		{"bad tokenizer.json", []string{"--tokenizer-dir", badTokenizerDir(t)}, "tokenizer.json"},
		{"no chat template file", []string{"--chat-template", "/nonexistent/t.jinja"}, `--chat-template "/nonexistent/t.jinja": want a readable Jinja template file`},
		{"unknown tool-call parser", []string{"--tool-call-parser", "hermes2"}, `--tool-call-parser: "hermes2" is not a parser here; want one of deepseek_v3, hermes, llama3_json, mistral, none, openai`},
		{"unknown reasoning parser", []string{"--reasoning-parser", "r1"}, `--reasoning-parser: "r1" is not a parser here; want one of deepseek_r1, `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--dry-run", "--registry-dir", t.TempDir(), "--engine-plugin", exe}, tc.args...)
			code, stdout, stderr := dryRun(t, args...)
			if code != ExitConfig {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, ExitConfig, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the adapter was started")
	}
}

// --dry-run checks what a start would find wrong before the engine: a
// built-in engine's options in process (nothing started), a third-party
// adapter by its handshake (an executable that is none is refused), a
// TMPDIR too long for the adapter's socket, and the Consul client's
// variables, each error naming what to change.
func TestRunDryRunAdapterAndConsul(t *testing.T) {
	notAdapter, _ := markerAdapter(t)
	longTmp := filepath.Join(t.TempDir(), strings.Repeat("d", 120))[:120]
	if err := os.MkdirAll(longTmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown option of a built-in engine", nil, []string{"--engine", "vllm", "--engine-option", "a=b"},
			`--engine-option "a": unknown key; this adapter takes no engine options`},
		{"bad option value of a built-in engine", nil, []string{"--engine", "sglang", "--engine-option", "api=grpc"},
			`--engine-option api="grpc": want auto, runtime or scheduler`},
		{"not an adapter", nil, []string{"--engine-plugin", notAdapter}, "not a vigil engine adapter"},
		{"TMPDIR too long for a socket path", map[string]string{"TMPDIR": longTmp}, []string{"--engine", "vllm"},
			"TMPDIR is 120 bytes long"},
		{"CONSUL_HTTP_SSL", map[string]string{"CONSUL_HTTP_SSL": "maybe"}, []string{"--engine", "vllm", "--discovery", "consul"},
			`CONSUL_HTTP_SSL="maybe": want true or false`},
		{"CONSUL_HTTP_SSL_VERIFY", map[string]string{"CONSUL_HTTP_SSL_VERIFY": "perhaps"}, []string{"--engine", "vllm", "--discovery", "consul"},
			`CONSUL_HTTP_SSL_VERIFY="perhaps"`},
		{"CONSUL_HTTP_ADDR", map[string]string{"CONSUL_HTTP_ADDR": "not an address"}, []string{"--engine", "vllm", "--discovery", "consul"},
			`CONSUL_HTTP_ADDR="not an address": not a host[:port]`},
		{"CONSUL_HTTP_ADDR port", map[string]string{"CONSUL_HTTP_ADDR": "http://127.0.0.1:85000"}, []string{"--engine", "vllm", "--discovery", "consul"},
			`CONSUL_HTTP_ADDR="http://127.0.0.1:85000"`},
		{"CONSUL_HTTP_ADDR scheme", map[string]string{"CONSUL_HTTP_ADDR": "ftp://127.0.0.1:8500"}, []string{"--engine", "vllm", "--discovery", "consul"},
			`CONSUL_HTTP_ADDR="ftp://127.0.0.1:8500": scheme "ftp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := t.TempDir()
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"run", "--dry-run", "--registry-dir", reg, "--listen", "127.0.0.1:8470"}, tc.args...)
			code, stdout, stderr := dryRun(t, args...)
			if code != ExitConfig || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit code %d, stdout %q; want %d and nothing on stdout, the error saying %q; stderr:\n%s", code, stdout, ExitConfig, tc.want, stderr)
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:8500", "https://consul.service:8501", "[::1]:8500", "unix:///run/consul.sock", "consul"} {
		if err := checkConsulAddr(addr); err != nil {
			t.Errorf("CONSUL_HTTP_ADDR=%q refused: %v", addr, err)
		}
	}
}

// --dry-run has no environment variable: one left in a unit's environment
// would turn every start into a clean exit.
func TestDryRunNotFromEnvironment(t *testing.T) {
	for _, f := range append(runCommand().Flags, routeCommand().Flags...) {
		if f.Names()[0] == "dry-run" {
			if ev, ok := f.(*cli.BoolFlag); !ok || len(ev.EnvVars) > 0 {
				t.Errorf("--dry-run is %T with environment %v, want a BoolFlag without", f, ev.EnvVars)
			}
		}
	}
}

// vigil route --dry-run validates, prints its settings and listens on
// nothing.
func TestRouteDryRun(t *testing.T) {
	listen, httpListen := busyAddr(t), busyAddr(t)
	t.Setenv("VIGIL_ROUTE_RETRIES", "3")
	code, stdout, stderr := dryRun(t, "route", "--dry-run", "--listen", listen, "--http-listen", httpListen,
		"--registry-dir", t.TempDir(), "--model", "m1,m2")
	if code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for key, want := range map[string]any{
		"listen": listen, "http-listen": httpListen, "retries": 3.0, "model": []any{"m1", "m2"}, "request-timeout": "10m0s",
	} {
		if !jsonEqual(got[key], want) {
			t.Errorf("%s = %#v, want %#v", key, got[key], want)
		}
	}
	code, stdout, stderr = dryRun(t, "route", "--dry-run", "--retries", "-1")
	if code != ExitConfig || !strings.Contains(stderr, "--retries -1") || stdout != "" {
		t.Errorf("bad --retries: exit %d, stdout %q, stderr %q; want %d naming --retries and no stdout", code, stdout, stderr, ExitConfig)
	}
}

// A secret flag's value is never printed, only whether it is set.
func TestDryRunRedactsSecrets(t *testing.T) {
	var out bytes.Buffer
	app := &cli.App{Writer: &out, ErrWriter: &out, Commands: []*cli.Command{{
		Name:  "x",
		Flags: []cli.Flag{&cli.StringFlag{Name: "api-key"}, &cli.StringFlag{Name: "unset-token"}, &cli.StringFlag{Name: "listen"}},
		Action: func(c *cli.Context) error {
			return printResolved(c, c.App.Writer, nil)
		},
	}}}
	if err := app.Run([]string{"vigil", "x", "--api-key", "sk-secret", "--listen", "a:1"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "sk-secret") {
		t.Errorf("the secret is printed:\n%s", out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["api-key"] != redacted || got["unset-token"] != "" || got["listen"] != "a:1" {
		t.Errorf("got %v, want api-key %q, unset-token empty, listen a:1", got, redacted)
	}
}

// --dry-run loads the tokenizer and compiles its chat template: a
// tokenizer.json that does not load, or a template in
// tokenizer_config.json that does not compile, is refused with exit 78
// naming --tokenizer-dir and the file.
func TestDryRunChecksTokenizerFiles(t *testing.T) {
	exe, _ := thirdPartyAdapter(t)
	model := fixtureModel(t, "qwen3")
	tokJSON, err := os.ReadFile(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	invert := strings.Replace(string(tokJSON), `"invert": false`, `"invert": "sometimes"`, 1)
	for name, tc := range map[string]struct{ tokenizer, config, file string }{
		"tokenizer.json not JSON": {`{"model": `, `{}`, "tokenizer.json"},
		"tokenizer.json's model":  {`{"model": {"type": "Nope", "vocab": {}}}`, `{}`, "tokenizer.json: model.type"},
		"a WordPiece model":       {`{"model": {"type": "WordPiece", "vocab": {}}}`, `{}`, "tokenizer.json: model.type"},
		"a pre-tokenizer option":  {invert, `{}`, "tokenizer.json: pre_tokenizer"},
		"chat template":           {string(tokJSON), `{"chat_template": "{% if %}"}`, "tokenizer_config.json"},
		"config not JSON":         {string(tokJSON), `{"chat_template": `, "tokenizer_config.json"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, body := range map[string]string{"tokenizer.json": tc.tokenizer, "tokenizer_config.json": tc.config} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := dryRun(t, "run", "--dry-run", "--registry-dir", t.TempDir(), "--engine-plugin", exe, "--tokenizer-dir", dir)
			want := `--tokenizer-dir "` + dir + `"`
			if code != ExitConfig || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, tc.file) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d naming %s and %s", code, stdout, stderr, ExitConfig, want, tc.file)
			}
		})
	}
}

// badTokenizerDir is a model directory whose tokenizer.json is not JSON.
func badTokenizerDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
