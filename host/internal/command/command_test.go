package command

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vigilhq/vigil/sdk"
)

// runArgs runs the CLI in-process and returns its exit code and output.
func runArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	err := App(&out, &out).Run(append([]string{"vigil"}, args...))
	if err == nil {
		return 0, out.String()
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), out.String() + err.Error()
	}
	return ExitConfig, out.String() + err.Error()
}

func TestRunRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown engine", []string{"--engine", "tgi"}, `--engine "tgi": unknown engine; built-in engines: sglang, trtllm, vllm`},
		{"missing plugin", []string{"--engine-plugin", "/no/such/adapter"}, `--engine-plugin "/no/such/adapter"`},
		{"engine address", []string{"--engine-addr", "50051"}, `--engine-addr "50051": want host:port`},
		{"listen port", []string{"--listen", "127.0.0.1:70000"}, "--listen \"127.0.0.1:70000\": port must be a number from 0 to 65535"},
		{"wildcard listen", []string{"--listen", ":8470"}, "wildcard address"},
		{"wildcard v6 listen", []string{"--listen", "[::]:8470"}, "set --advertise-addr"},
		{"wildcard advertise", []string{"--listen", ":8470", "--advertise-addr", "0.0.0.0:8470"}, "--advertise-addr"},
		{"port 0 listen", []string{"--listen", "127.0.0.1:0"}, "port 0"},
		{"negative grace", []string{"--grace-period", "-1s"}, "--grace-period -1s: must be a positive duration"},
		{"zero deadline", []string{"--startup-deadline", "0s"}, "--startup-deadline 0s: must be a positive duration"},
		{"negative drain timeout", []string{"--drain-timeout", "-1s"}, "--drain-timeout -1s: must be a positive duration"},
		{"negative stall timeout", []string{"--stall-timeout", "-1s"}, "--stall-timeout -1s: must be a positive duration"},
		{"on loss", []string{"--on-loss", "restart"}, `--on-loss "restart": want exit or wait`},
		{"on loss, dry run", []string{"--on-loss", "Wait", "--dry-run"}, `--on-loss "Wait": want exit or wait`},
		{"short ttl", []string{"--check-ttl", "100ms"}, "--check-ttl 100ms: must be a duration of at least 1s"},
		{"short deregister", []string{"--deregister-after", "30s"}, "--deregister-after 30s: must be a duration of at least 1m0s"},
		{"health failures", []string{"--health-failures", "0"}, "--health-failures 0: must be 1 or more"},
		{"negative busy timeout", []string{"--health-busy-timeout", "-1s"}, "--health-busy-timeout -1s: must be a positive duration"},
		{"negative confirm", []string{"--health-confirm", "-200ms"}, "--health-confirm -200ms: must be a positive duration"},
		{"discovery", []string{"--discovery", "zk"}, `--discovery "zk": want file or consul`},
		{"service", []string{"--service-name", "a/b"}, "--service-name"},
		{"service escapes", []string{"--service-name", ".."}, "--service-name \"..\": want letters"},
		{"hidden worker id", []string{"--worker-id", ".hidden"}, "--worker-id \".hidden\""},
		{"registry dir not a dir", []string{"--registry-dir", "/dev/null"}, "--registry-dir \"/dev/null\": cannot write"},
		{"engine option", []string{"--engine-option", "novalue"}, `--engine-option "novalue": want key=value`},
		{"blank served model name", []string{"--served-model-name", "  "}, `--served-model-name "  ": must not be blank`},
		{"padded served model name", []string{"--served-model-name", " my-model"}, `--served-model-name " my-model": must not begin or end with white space`},
		{"served model name with a newline", []string{"--served-model-name", "my\nmodel"}, `--served-model-name "my\nmodel": must not contain control characters`},
		{"long served model name", []string{"--served-model-name", strings.Repeat("m", 513)}, "513 bytes long, want at most 512"},
		{"log format", []string{"--log-format", "xml"}, `--log-format "xml": want text or json`},
		{"log level", []string{"--log-level", "loud"}, `--log-level "loud"`},
		{"argument", []string{"extra"}, "run takes no arguments"},
		{"unparsable duration", []string{"--grace-period", "soon"}, `--grace-period "soon": want a duration such as 500ms, 30s or 5m`},
		{"unparsable number", []string{"--health-failures", "two"}, `--health-failures "two": want a whole number`},
		{"unknown flag", []string{"--no-such"}, "unknown flag --no-such; see vigil run --help"},
		{"engine name", []string{"--engine", "../x"}, `--engine "../x": want letters`},
		{"sha256", []string{"--engine-plugin-sha256", "abc"}, `--engine-plugin-sha256 "abc": want 64 hex digits`},
		{"plugin env name", []string{"--plugin-env", "A=B"}, `--plugin-env "A=B": want a variable's name`},
		{"plugin env reserved", []string{"--plugin-env", "VIGIL_ENGINE"}, `--plugin-env "VIGIL_ENGINE": vigil's own variables (CONSUL_*, VIGIL_*) are never passed`},
		{"plugin start timeout", []string{"--plugin-start-timeout", "0s"}, "--plugin-start-timeout 0s: must be a positive duration"},
		{"not a plugin", []string{"--engine-plugin", "/dev/null"}, `--engine-plugin "/dev/null": not an executable file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runArgs(t, append([]string{"run", "--registry-dir", t.TempDir()}, tc.args...)...)
			if code != ExitConfig {
				t.Errorf("exit code = %d, want %d; output:\n%s", code, ExitConfig, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not contain %q:\n%s", tc.want, out)
			}
		})
	}
}

// parseRunArgs parses run's flags and environment as vigil run would,
// without running anything.
func parseRunArgs(t *testing.T, args ...string) (runConfig, error) {
	t.Helper()
	cmd := runCommand()
	var cfg runConfig
	var parseErr error
	cmd.Action = func(c *cli.Context) error {
		cfg, parseErr = parseRun(c)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
	if err := app.Run(append([]string{"vigil", "run", "--registry-dir", t.TempDir()}, args...)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return cfg, parseErr
}

// --served-model-name, from the flag or VIGIL_SERVED_MODEL_NAME (the flag
// wins); unset or empty, the engine's own name is used.
func TestServedModelNameFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string // VIGIL_SERVED_MODEL_NAME; "" leaves it unset
		args []string
		want string
	}{
		{"unset", "", nil, ""},
		{"empty", "", []string{"--served-model-name", ""}, ""},
		{"flag", "", []string{"--served-model-name", "my-model"}, "my-model"},
		{"a path is a name too", "", []string{"--served-model-name", "/models/Llama-3.1-8B"}, "/models/Llama-3.1-8B"},
		{"environment", "env-model", nil, "env-model"},
		{"flag over environment", "env-model", []string{"--served-model-name", "flag-model"}, "flag-model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("VIGIL_SERVED_MODEL_NAME", tc.env)
			}
			cfg, err := parseRunArgs(t, tc.args...)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cfg.servedModelName != tc.want {
				t.Errorf("served model name = %q, want %q", cfg.servedModelName, tc.want)
			}
		})
	}
	t.Run("blank environment", func(t *testing.T) {
		t.Setenv("VIGIL_SERVED_MODEL_NAME", " ")
		code, out := runArgs(t, "run", "--registry-dir", t.TempDir())
		if code != ExitConfig || !strings.Contains(out, "--served-model-name") {
			t.Errorf("exit code %d, output %q; want %d naming --served-model-name", code, out, ExitConfig)
		}
	})
}

// --on-loss: exit by default (the seed's contract), wait from the flag or
// VIGIL_ON_LOSS (the flag wins); a bad value from the environment exits 78
// naming the flag.
func TestOnLossFlag(t *testing.T) {
	for _, tc := range []struct {
		name, env string // env: VIGIL_ON_LOSS; "" leaves it unset
		args      []string
		wait      bool
	}{
		{"default", "", nil, false},
		{"flag", "", []string{"--on-loss", "wait"}, true},
		{"exit", "", []string{"--on-loss", "exit"}, false},
		{"environment", "wait", nil, true},
		{"flag over environment", "wait", []string{"--on-loss", "exit"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("VIGIL_ON_LOSS", tc.env)
			}
			cfg, err := parseRunArgs(t, tc.args...)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cfg.waitOnLoss != tc.wait {
				t.Errorf("wait on loss = %v, want %v", cfg.waitOnLoss, tc.wait)
			}
		})
	}
	t.Run("bad environment", func(t *testing.T) {
		t.Setenv("VIGIL_ON_LOSS", "retry")
		code, out := runArgs(t, "run", "--registry-dir", t.TempDir(), "--dry-run")
		if code != ExitConfig || !strings.Contains(out, `--on-loss "retry": want exit or wait`) {
			t.Errorf("exit code %d, output %q; want %d naming --on-loss and its values", code, out, ExitConfig)
		}
	})
}

func TestDefaultWorkerID(t *testing.T) {
	t.Setenv("NOMAD_ALLOC_ID", "6f1c")
	t.Setenv("NOMAD_TASK_NAME", "vllm")
	if got := defaultWorkerID("127.0.0.1", 8470); got != "6f1c-vllm" {
		t.Errorf("under Nomad: %q, want 6f1c-vllm", got)
	}
	t.Setenv("NOMAD_ALLOC_ID", "")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// Outside Nomad: unique per listen address, and always a valid name.
	for listen, want := range map[string]string{
		"127.0.0.1":    host + "-127.0.0.1-8470",
		"127.0.0.2":    host + "-127.0.0.2-8470",
		"localhost":    host + "-localhost-8470",
		"::1":          host + "-::1-8470",
		"fe80::1%eth0": host + "-fe80::1-eth0-8470",
		"0.0.0.0":      host + "-8470",
		"::":           host + "-8470",
		"":             host + "-8470",
	} {
		got := defaultWorkerID(listen, 8470)
		if got != want || !validName(got) {
			t.Errorf("listen host %q: %q (valid: %v), want %q", listen, got, validName(got), want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out := runArgs(t, "version")
	if code != 0 || !strings.Contains(out, "plugin protocol 1") {
		t.Errorf("version: code %d, output %q", code, out)
	}
}

func TestUnknownCommand(t *testing.T) {
	// Main writes to the process's stderr; the exit code is what matters.
	if code := Main([]string{"vigil", "routex"}); code != ExitConfig {
		t.Errorf("unknown command: exit %d, want %d", code, ExitConfig)
	}
}

// TestDNSLabel: service names Consul's DNS interface cannot resolve are
// told apart from those it can, for run's warning.
func TestDNSLabel(t *testing.T) {
	for name, want := range map[string]bool{
		"llm": true, "llm-70b": true, "L3": true, strings.Repeat("a", 63): true,
		"": false, "llm.chat": false, "llm_chat": false, "llm:8b": false, "-llm": false, "llm-": false, strings.Repeat("a", 64): false,
	} {
		if got := dnsLabel(name); got != want {
			t.Errorf("dnsLabel(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestWorkerIDLimit: with the file registry, a worker id too long for a
// file name is a configuration error at startup (it would otherwise fail
// every registration with "file name too long"); Consul takes it, up to
// its 512 bytes of a meta value.
func TestWorkerIDLimit(t *testing.T) {
	long := strings.Repeat("w", 300)
	_, err := parseRunArgs(t, "--worker-id", long)
	var ec cli.ExitCoder
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != ExitConfig ||
		!strings.Contains(err.Error(), "--worker-id") || !strings.Contains(err.Error(), "300 bytes long, want at most 239 with --discovery file") {
		t.Fatalf("parseRun(300-byte --worker-id) = %v, want a configuration error naming --worker-id and the limit 239", err)
	}
	if _, err := parseRunArgs(t, "--worker-id", long[:239]); err != nil {
		t.Errorf("parseRun(239-byte --worker-id) = %v, want nil", err)
	}
	if _, err := parseRunArgs(t, "--worker-id", long, "--discovery", "consul"); err != nil {
		t.Errorf("parseRun(300-byte --worker-id, consul) = %v, want nil", err)
	}
	// Consul's limit on a meta value, which the worker id is.
	if _, err := parseRunArgs(t, "--worker-id", strings.Repeat("w", 513), "--discovery", "consul"); err == nil ||
		!strings.Contains(err.Error(), "513 bytes long, want at most 512") {
		t.Errorf("parseRun(513-byte --worker-id, consul) = %v, want a configuration error naming the limit 512", err)
	}
}

// --health-busy-timeout and --health-confirm reach the adapter's health
// policy, from the flag or VIGIL_*; the busy timeout's 0 is off (the
// policy's negative), its default the sdk's.
func TestHealthBusyAndConfirmFlags(t *testing.T) {
	tests := map[string]struct {
		args       []string
		env        map[string]string
		busy, hold time.Duration
	}{
		"defaults":    {busy: sdk.DefaultBusyTimeout},
		"flags":       {args: []string{"--health-busy-timeout", "45s", "--health-confirm", "500ms"}, busy: 45 * time.Second, hold: 500 * time.Millisecond},
		"busy off":    {args: []string{"--health-busy-timeout", "0"}, busy: -1},
		"environment": {env: map[string]string{"VIGIL_HEALTH_BUSY_TIMEOUT": "10s", "VIGIL_HEALTH_CONFIRM": "1s"}, busy: 10 * time.Second, hold: time.Second},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := parseRunArgs(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.start.Health; got.BusyTimeout != tt.busy || got.Confirm != tt.hold {
				t.Errorf("Health = {BusyTimeout: %v, Confirm: %v}, want {%v, %v}", got.BusyTimeout, got.Confirm, tt.busy, tt.hold)
			}
		})
	}
}
