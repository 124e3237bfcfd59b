package command

import (
	"bufio"
	"encoding/json"
	"github.com/vigilhq/vigil/host/internal/supervisor"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deployDir holds the deploy recipes, relative to this package.
const deployDir = "../../../deploy"

// Each recipe marks its vigil arguments with a vigil-args:begin and a
// vigil-args:end comment; inside, every --flag or --flag=value is one.
var (
	argsBlock = regexp.MustCompile(`(?s)vigil-args:begin(.*?)vigil-args:end`)
	argToken  = regexp.MustCompile(`(?:^|[\s"'\[,])(--[a-z][a-z0-9-]*(?:=[^\s"',\\\]]*)?)`)
	runWord   = regexp.MustCompile(`(?:^|[\s"'/])run(?:$|[\s"',\\])`)
)

// recipeArgs returns the vigil run arguments of a recipe, each of subst's
// keys (the orchestrator's interpolations) replaced by its value.
func recipeArgs(t *testing.T, text string, subst map[string]string) []string {
	t.Helper()
	m := argsBlock.FindAllStringSubmatch(text, -1)
	if len(m) != 1 {
		t.Fatalf("the recipe has %d vigil-args:begin ... vigil-args:end blocks, want 1", len(m))
	}
	block := m[0][1]
	for k, v := range subst {
		if !strings.Contains(block, k) {
			t.Errorf("the recipe's arguments do not hold %q, which the test substitutes: update the test", k)
		}
		block = strings.ReplaceAll(block, k, v)
	}
	if !runWord.MatchString(block) {
		t.Errorf("the recipe's arguments do not start vigil run:\n%s", block)
	}
	var args []string
	for _, tok := range argToken.FindAllStringSubmatch(block, -1) {
		args = append(args, tok[1])
	}
	if len(args) == 0 {
		t.Fatalf("found no arguments in the recipe's block, want the flags of vigil run:\n%s", block)
	}
	return args
}

// envFile reads a KEY=VALUE file as systemd's EnvironmentFile= does
// (comments and blank lines skipped, no quoting used).
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// Each deploy recipe's vigil arguments (and environment) pass
// vigil run --dry-run, and the recipe's stop timeout outlasts the
// shutdown budget vigil reports for them, so a planned stop never kills
// vigil mid-drain; the restart settings spare a configuration error where
// the supervisor can.
func TestRecipesPassDryRun(t *testing.T) {
	for _, tc := range []struct {
		file  string
		subst map[string]string // interpolations, with sample values
		env   map[string]string
		// envFile is read as the recipe's environment, beside env.
		envFile string
		// stop captures the recipe's stop timeout for vigil (seconds
		// when it has no unit).
		stop *regexp.Regexp
		// has are lines the recipe must hold.
		has []string
		// hasNot matches what the recipe must not hold.
		hasNot *regexp.Regexp
		want   map[string]string // resolved settings
	}{{
		file: "nomad/vigil.nomad.hcl",
		subst: map[string]string{
			"${NOMAD_ADDR_engine}":    "10.0.0.5:31001",
			"${NOMAD_ADDR_grpc}":      "10.0.0.5:31002",
			"${NOMAD_HOST_ADDR_grpc}": "10.0.0.5:31002",
		},
		env:    map[string]string{"NOMAD_ALLOC_ID": "5f3a9c1e-0b7d-4e2a-9c1d-2b3e4f5a6b7c", "NOMAD_TASK_NAME": "vigil", "CONSUL_HTTP_ADDR": "10.0.0.5:8500"},
		stop:   regexp.MustCompile(`(?s)task "vigil".*?kill_timeout\s*=\s*"([^"]+)"`),
		has:    []string{`shutdown_delay = "40s"`, `mode     = "fail"`, `kill_signal  = "SIGTERM"`},
		hasNot: regexp.MustCompile(`(?m)^\s*service\s*\{`),
		// wait: an exit spends one of the restart block's attempts and its
		// delay on each engine loss, and the last fails the allocation.
		want: map[string]string{"worker-id": "5f3a9c1e-0b7d-4e2a-9c1d-2b3e4f5a6b7c-vigil", "advertise-addr": "10.0.0.5:31002", "on-loss": "wait"},
	}, {
		file:    "systemd/vigil@.service",
		subst:   map[string]string{"%H": "gpu-host-1", "%i": "vllm0"},
		envFile: "systemd/vigil.env",
		stop:    regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)$`),
		has: []string{"Restart=on-failure", "RestartPreventExitStatus=" + strconv.Itoa(ExitConfig), "KillSignal=SIGTERM",
			"KillMode=mixed", "EnvironmentFile=/etc/vigil/%i.env"},
		// exit: systemd restarts it after RestartSec (2s), without a growing
		// back-off.
		want: map[string]string{"worker-id": "gpu-host-1-vllm0", "advertise-addr": "10.0.0.5:8470", "discovery": "consul", "on-loss": "exit"},
	}, {
		file:  "kubernetes/vigil.yaml",
		subst: map[string]string{"$(POD_IP)": "10.1.2.3", "$(POD_NAME)": "llm-vllm-7d9f8-x2x4q"},
		env:   map[string]string{"CONSUL_HTTP_ADDR": "10.0.0.5:8500"},
		stop:  regexp.MustCompile(`(?m)terminationGracePeriodSeconds:\s*(\d+)`),
		has: []string{"restartPolicy: Always", "shareProcessNamespace: true", "readinessProbe:", "livenessProbe:",
			"grpc: {port: 8470}", "grpc: {port: 8470, service: vigil.liveness}", "preStop:", `[ "${1##*/}" = vigil ] && [ "$2" = run ]`},
		// wait: an exit would meet the kubelet's crash back-off (up to 5
		// minutes unregistered); the liveness probe reads vigil.liveness,
		// SERVING while vigil waits.
		want: map[string]string{"worker-id": "llm-vllm-7d9f8-x2x4q", "advertise-addr": "10.1.2.3:8470", "on-loss": "wait"},
	}, {
		file: "supervisord/vigil.conf",
		env:  map[string]string{"CONSUL_HTTP_ADDR": "127.0.0.1:8500"},
		stop: regexp.MustCompile(`(?m)^stopwaitsecs=(\d+)$`),
		has:  []string{"autorestart=unexpected", "exitcodes=0", "stopsignal=TERM", "stopasgroup=false"},
		// exit: supervisord restarts a program that ran past startsecs at
		// once.
		want: map[string]string{"advertise-addr": "10.0.0.5:8470", "on-loss": "exit"},
	}} {
		t.Run(filepath.Dir(tc.file), func(t *testing.T) {
			path := filepath.Join(deployDir, tc.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			args := recipeArgs(t, text, tc.subst)
			env := map[string]string{}
			if tc.envFile != "" {
				env = envFile(t, filepath.Join(deployDir, tc.envFile))
			}
			for k, v := range tc.env {
				env[k] = v
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			if _, ok := env["NOMAD_ALLOC_ID"]; !ok {
				t.Setenv("NOMAD_ALLOC_ID", "")
			}
			code, stdout, stderr := dryRun(t, append([]string{"run", "--dry-run"}, args...)...)
			if code != 0 {
				t.Fatalf("vigil run --dry-run %s: exit %d, want 0:\n%s", strings.Join(args, " "), code, stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("dry run output: %v\n%s", err, stdout)
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %v, want %s", k, got[k], want)
				}
			}
			budget, err := time.ParseDuration(got["shutdown-budget"].(string))
			if err != nil {
				t.Fatal(err)
			}
			m := tc.stop.FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("no stop timeout (%s) in the recipe", tc.stop)
			}
			s := m[1]
			if _, err := strconv.Atoi(s); err == nil {
				s += "s"
			}
			stop, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("stop timeout %q: %v", m[1], err)
			}
			// A margin for the supervisor's own signalling and reaping.
			if margin := 3 * time.Second; stop < budget+margin {
				t.Errorf("stop timeout %s, want at least vigil's shutdown budget %s + %s", stop, budget, margin)
			}
			// An engine that drains on purpose: vigil exits within the drain
			// timeout + 2s of it, and a stop signal meanwhile within the grace
			// period + 2s of the signal (the worker is withdrawn already, so no
			// shutdown delay), which the stop timeout must outlast too.
			drain, err := time.ParseDuration(got["engine-drain-budget"].(string))
			if err != nil {
				t.Fatal(err)
			}
			drainTimeout, _ := time.ParseDuration(got["drain-timeout"].(string))
			grace, _ := time.ParseDuration(got["grace-period"].(string))
			if want := supervisor.EngineDrainBudget(drainTimeout); drain != want || want != drainTimeout+2*time.Second {
				t.Errorf("engine-drain-budget %s, want --drain-timeout %s + 2s", drain, drainTimeout)
			}
			if during := supervisor.ShutdownBudget(0, grace); stop < during+3*time.Second {
				t.Errorf("stop timeout %s, want at least the budget of a stop during the engine's drain %s + 3s", stop, during)
			}
			t.Logf("vigil %s: shutdown budget %s, engine drain budget %s, stop timeout %s", strings.Join(args, " "), budget, drain, stop)
			for _, h := range tc.has {
				if !strings.Contains(text, h) {
					t.Errorf("the recipe does not hold %q", h)
				}
			}
			if tc.hasNot != nil && tc.hasNot.MatchString(text) {
				t.Errorf("the recipe holds %q: %s", tc.hasNot.FindString(text), tc.hasNot)
			}
		})
	}
}

// The Nomad and Kubernetes recipes name vigil's image as REGISTRY/vigil at
// a version: a bare vigil:latest would pull someone else's image, and
// localhost/vigil is on no node but the one that ran make image.
func TestRecipesNameARealImage(t *testing.T) {
	for file, image := range map[string]*regexp.Regexp{
		"nomad/vigil.nomad.hcl": regexp.MustCompile(`(?s)task "vigil".*?\bimage\s*=\s*"([^"]+)"`),
		"kubernetes/vigil.yaml": regexp.MustCompile(`(?m)^\s*- name: vigil\n\s*(?:#.*\n\s*)*image:\s*(\S+)`),
	} {
		t.Run(filepath.Dir(file), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(deployDir, file))
			if err != nil {
				t.Fatal(err)
			}
			m := image.FindSubmatch(b)
			if m == nil {
				t.Fatalf("no image of vigil (%s) in the recipe", image)
			}
			ref := string(m[1])
			i := strings.LastIndex(ref, ":")
			if i < 0 || strings.Contains(ref[i:], "/") {
				t.Fatalf("image %q has no tag, want REGISTRY/vigil:VERSION", ref)
			}
			repo, tag := ref[:i], ref[i+1:]
			if !strings.HasSuffix(repo, "/vigil") {
				t.Errorf("image %q: the repository does not end in /vigil, want REGISTRY/vigil:VERSION", ref)
			}
			if tag == "latest" || tag == "" {
				t.Errorf("image %q: tag %q, want a version (REGISTRY/vigil:VERSION)", ref, tag)
			}
			if !strings.Contains(string(b), "make image") {
				t.Error("the recipe does not say to push what make image built")
			}
		})
	}
}
