package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// supervisordRecipe is the supervisord recipe, relative to this package.
const supervisordRecipe = "../deploy/supervisord/vigil.conf"

// supervisordBins finds supervisord and supervisorctl (Debian's supervisor
// package); the test skips without them unless VIGIL_REQUIRE_SUPERVISORD=1
// (CI), when their absence fails it.
func supervisordBins(t *testing.T) (supervisord, supervisorctl string) {
	t.Helper()
	d, err1 := exec.LookPath("supervisord")
	c, err2 := exec.LookPath("supervisorctl")
	if err1 != nil || err2 != nil {
		if os.Getenv("VIGIL_REQUIRE_SUPERVISORD") == "1" {
			t.Fatalf("VIGIL_REQUIRE_SUPERVISORD=1 and supervisord is missing (%v, %v): apt-get install supervisor", err1, err2)
		}
		t.Skip("supervisord not installed (Debian package supervisor); VIGIL_REQUIRE_SUPERVISORD=1 makes this a failure")
	}
	return d, c
}

// programSection returns the recipe's [program:vigil] section with each
// of subst's keys replaced by its value; every key must be found, so that
// the test follows the recipe.
func programSection(t *testing.T, subst [][2]string) string {
	t.Helper()
	return recipeSection(t, "program:vigil", subst)
}

// recipeSection is programSection for the recipe's section [name].
func recipeSection(t *testing.T, name string, subst [][2]string) string {
	t.Helper()
	b, err := os.ReadFile(supervisordRecipe)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "["+name+"]")
	if start < 0 {
		t.Fatalf("%s has no [%s] section", supervisordRecipe, name)
	}
	section := text[start:]
	if next := strings.Index(section[1:], "\n["); next >= 0 {
		section = section[:next+1]
	}
	for _, s := range subst {
		if !strings.Contains(section, s[0]) {
			t.Fatalf("the recipe's program section does not hold %q, which the test substitutes: update the test", s[0])
		}
		section = strings.ReplaceAll(section, s[0], s[1])
	}
	return section
}

// spawnedPid matches supervisord's line for a program it started.
var spawnedPid = regexp.MustCompile(`spawned: '([^']+)' with pid (\d+)`)

// TestSupervisord runs vigil under the real supervisord, with the deploy
// recipe's program section (paths and addresses substituted), against a
// mock engine and a Consul agent: an engine loss makes vigil withdraw the
// worker and exit 1, supervisord restarts it, and it registers again once
// the engine is back; `supervisorctl stop` makes vigil withdraw and exit
// 0, and supervisord leaves it stopped.
func TestSupervisord(t *testing.T) {
	skipShort(t)
	supervisord, supervisorctl := supervisordBins(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	dir := t.TempDir()
	listen := addr(freePort(t))
	program := programSection(t, [][2]string{
		// GORACE reaches the race-built adapter, which otherwise sleeps 1s at exit.
		{"/usr/local/bin/vigil run", vigilBin + " run --plugin-env=GORACE --check-ttl=5s"},
		{"--engine-addr=127.0.0.1:50051", "--engine-addr=" + m.GRPC},
		{"--service-name=llm", "--service-name=" + svc},
		{"--listen=0.0.0.0:8470", "--listen=" + listen},
		{"--advertise-addr=10.0.0.5:8470", "--advertise-addr=" + listen},
		// The recipe's 5s keeps admitting after the stop; the test needs no
		// late load balancer.
		{"--shutdown-delay=5s", "--shutdown-delay=500ms"},
		{`CONSUL_HTTP_ADDR="127.0.0.1:8500"`, fmt.Sprintf("CONSUL_HTTP_ADDR=%q", c.Addr)},
		{"/var/log/vigil.log", filepath.Join(dir, "vigil.log")},
	})
	sd, ctl := startSupervisord(t, supervisord, supervisorctl, dir, program)
	sd.waitLine("success: vigil entered RUNNING state", 30*time.Second)
	registeredWith(t, c, svc, m.InstanceID)
	t.Logf("registered under supervisord: %s", ctl("status", "vigil"))

	// Engine loss: vigil withdraws the worker, drains and exits 1, which
	// supervisord restarts (autorestart=unexpected, exitcodes=0).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	withdrawn := c.Observe(ctx, svc, count(0))
	lost := time.Now()
	m.signal(syscall.SIGKILL)
	m.wait(10 * time.Second)
	at, err := withdrawn.Wait()
	if err != nil {
		t.Fatalf("the worker was not withdrawn after its engine was killed: %v", err)
	}
	sd.waitLine("exited: vigil (exit status 1; not expected)", 30*time.Second)
	exitedAt := time.Now()
	sd.waitCount(t, "spawned: 'vigil'", 2, 30*time.Second)
	respawned := time.Now()
	t.Logf("engine killed: withdrawn after %s, vigil exited 1 and supervisord restarted it within %s (exit seen at %s)",
		at.Sub(lost).Round(time.Millisecond), respawned.Sub(lost).Round(time.Millisecond), exitedAt.Sub(lost).Round(time.Millisecond))

	// The engine comes back on its address: the restarted vigil registers
	// the new engine.
	back := time.Now()
	next := startMock(t, e, harness.MockOpts{GRPC: m.GRPC})
	registeredWith(t, c, svc, next.InstanceID)
	t.Logf("engine back: registered again after %s", time.Since(back).Round(time.Millisecond))

	// A planned stop: SIGTERM (stopsignal=TERM), withdrawn, exit 0, and
	// supervisord leaves vigil stopped.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	withdrawn = c.Observe(ctx2, svc, count(0))
	if o := withdrawn.Done(); isClosed(o) {
		t.Fatalf("the worker was not passing before the stop")
	}
	stopped := time.Now()
	out := ctl("stop", "vigil")
	took := time.Since(stopped)
	if !strings.Contains(out, "vigil: stopped") {
		t.Errorf("supervisorctl stop vigil: %q, want vigil: stopped", out)
	}
	at, err = withdrawn.Wait()
	if err != nil {
		t.Fatalf("the worker was not withdrawn on supervisorctl stop: %v", err)
	}
	line := sd.waitLine("stopped: vigil (", 10*time.Second)
	if !strings.Contains(line, "stopped: vigil (exit status 0)") {
		t.Errorf("supervisord: %q, want vigil stopped with exit status 0", line)
	}
	t.Logf("supervisorctl stop: withdrawn after %s, supervisorctl returned after %s", at.Sub(stopped).Round(time.Millisecond), took.Round(time.Millisecond))
	if st := ctl("status", "vigil"); !strings.Contains(st, "STOPPED") {
		t.Errorf("supervisorctl status vigil: %q, want STOPPED", st)
	}
	if n := sd.Count("spawned: 'vigil'"); n != 2 {
		t.Errorf("supervisord started vigil %d times, want 2 (the start and the restart after the engine loss)", n)
	}
	if c.catalogHas(t, svc) {
		t.Error("the agent still holds the worker after vigil stopped")
	}
}

// startSupervisord runs supervisord with the program sections given, in
// dir, until the test ends, and returns it and a supervisorctl runner.
func startSupervisord(t *testing.T, supervisord, supervisorctl, dir string, programs ...string) (*proc, func(args ...string) string) {
	t.Helper()
	conf := filepath.Join(dir, "supervisord.conf")
	sock := filepath.Join(dir, "supervisor.sock")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`[unix_http_server]
file=%[1]s

[supervisord]
nodaemon=true
logfile=/dev/null
logfile_maxbytes=0
pidfile=%[2]s/supervisord.pid
childlogdir=%[2]s
user=%[3]d

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://%[1]s

%[4]s`, sock, dir, os.Getuid(), strings.Join(programs, "\n"))), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(supervisorctl, append([]string{"-c", conf}, args...)...).CombinedOutput()
		if err != nil && args[0] != "status" { // status exits non-zero for a program not running
			t.Fatalf("supervisorctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}

	sd := startProc(t, "supervisord", supervisord, "-c", conf)
	// supervisord starts each program in a process group of its own, which
	// killing supervisord's group misses: stop it as it would be stopped
	// (its programs first), and kill what is left. nodaemon=true logs to
	// stderr too, which is read; the log file is none.
	t.Cleanup(func() {
		if !sd.exited() {
			_ = sd.Signal(syscall.SIGTERM)
			_, _, _ = sd.Wait(60 * time.Second)
		}
		for _, l := range strings.Split(sd.output(), "\n") {
			if m := spawnedPid.FindStringSubmatch(l); m != nil {
				pid, _ := strconv.Atoi(m[2])
				if alive(pid) {
					t.Errorf("%s (pid %d) outlived supervisord", m[1], pid)
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
		if t.Failed() {
			for _, name := range []string{"vigil", "engine"} {
				if b, err := os.ReadFile(filepath.Join(dir, name+".log")); err == nil {
					t.Logf("--- %s's log:\n%s", name, b)
				}
			}
		}
	})
	return sd, ctl
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestSupervisordStopsVigilFirst runs the recipe's vigil and engine
// programs (the engine, a mock, under vigil-engine-wrapper) under the real
// supervisord, with a request in flight, and stops them all: with
// `supervisorctl stop all`, which signals every program at once, and with
// `supervisorctl shutdown`, which stops them by priority, and with the
// engine's program alone, whose wrapper stops vigil's. Each way vigil
// drains first (exit 0, not cut by a second signal), the request finishes
// whole through the engine, and only then does the engine stop.
func TestSupervisordStopsVigilFirst(t *testing.T) {
	skipShort(t)
	supervisord, supervisorctl := supervisordBins(t)
	wrapper, err := filepath.Abs("../deploy/supervisord/vigil-engine-wrapper")
	if err != nil {
		t.Fatal(err)
	}
	e := firstEngine()
	// "starting": the engine's program stops while vigil's is still
	// STARTING (within startsecs, here made long), which the wrapper must
	// stop too, not wait for.
	for _, stop := range []string{"stop all", "shutdown", "stop engine", "stop engine starting"} {
		startsecs := "startsecs=1"
		if strings.HasSuffix(stop, " starting") {
			startsecs = "startsecs=600"
		}
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			c := consulFor(t)
			svc := uniqueService(t)
			dir := t.TempDir()
			listen := addr(freePort(t))
			o := harness.MockOpts{GRPC: addr(freePort(t)), Control: addr(freePort(t)), Model: e.model,
				InstanceID: e.NewInstanceID(), TokenDelay: delay(20 * time.Millisecond)}
			engine := recipeSection(t, "program:engine", [][2]string{
				{"/usr/local/bin/vigil-engine-wrapper", wrapper},
				{"vllm serve meta-llama/Llama-3.1-8B-Instruct --grpc-port 50051", e.mockBin + " " + strings.Join(e.MockArgs(o), " ")},
				{"/var/log/engine.log", filepath.Join(dir, "engine.log")},
			})
			vigil := programSection(t, [][2]string{
				{"/usr/local/bin/vigil run", vigilBin + " run --plugin-env=GORACE --check-ttl=5s"},
				{"--engine-addr=127.0.0.1:50051", "--engine-addr=" + o.GRPC},
				{"--service-name=llm", "--service-name=" + svc},
				{"--listen=0.0.0.0:8470", "--listen=" + listen},
				{"--advertise-addr=10.0.0.5:8470", "--advertise-addr=" + listen},
				{"--shutdown-delay=5s", "--shutdown-delay=500ms"},
				{`CONSUL_HTTP_ADDR="127.0.0.1:8500"`, fmt.Sprintf("CONSUL_HTTP_ADDR=%q", c.Addr)},
				{"/var/log/vigil.log", filepath.Join(dir, "vigil.log")},
				{"startsecs=1", startsecs},
			})
			sd, ctl := startSupervisord(t, supervisord, supervisorctl, dir, vigil, engine)
			registeredWith(t, c, svc, o.InstanceID)

			first := make(chan struct{})
			res := make(chan completion, 1)
			go func() {
				// 100 tokens at 20ms: about 2s.
				res <- generate(context.Background(), workerClient(t, listen), tokenPrompt("inflight", 100, 1), func(n int) {
					if n == 1 {
						close(first)
					}
				})
			}()
			select {
			case <-first:
			case r := <-res:
				t.Fatalf("request ended before its first token: %v", r.err)
			case <-time.After(30 * time.Second):
				t.Fatal("no first token within 30s")
			}
			if stop == "shutdown" {
				ctl("shutdown")
				if _, _, err := sd.Wait(60 * time.Second); err != nil {
					t.Fatalf("supervisord did not exit after shutdown: %v", err)
				}
			} else {
				ctl(strings.Fields(strings.TrimSuffix(stop, " starting"))...)
			}
			if r := <-res; r.err != nil || len(r.tokens) != 100 {
				t.Errorf("request in flight: %d tokens, err %v; want all 100: the engine must outlive vigil's drain", len(r.tokens), r.err)
			}
			out := sd.output()
			vigilStopped := strings.Index(out, "stopped: vigil (exit status 0)")
			engineStopped := strings.Index(out, "stopped: engine (")
			if vigilStopped < 0 || engineStopped < vigilStopped {
				t.Errorf("supervisord's log: want vigil stopped with exit status 0, then the engine:\n%s", out)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "vigil.log")); strings.Contains(string(b), "second signal") {
				t.Errorf("vigil's drain was cut by a second signal:\n%s", b)
			}
		})
	}
}
