package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// Behavioural bounds, with slack for a loaded 2-core machine under -race;
// the real figures are in the benchmarks.
const (
	registerBound = 2 * time.Second
	exitBound     = 10 * time.Second
)

// TestRegistersWhileEngineServes: the engine is up first; the worker is
// passing in Consul with the engine's model and instance id in its meta.
func TestRegistersWhileEngineServes(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		c := consulFor(t)
		m := startMock(t, e, harness.MockOpts{})
		svc := uniqueService(t)
		started := time.Now()
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})

		entries, seen := c.passing(t, svc, 30*time.Second, count(1))
		// The engine already serves: the bound runs from vigil's start.
		if d := seen.Sub(started); d > registerBound {
			t.Errorf("passing %s after vigil started, want within %s", d, registerBound)
		}
		s := entries[0].Service
		want := map[string]string{"engine": e.Name, "model": e.servedModel, "model_id": e.modelID, "instance_id": e.instanceID(m), "worker_id": v.WorkerID}
		for k, w := range want {
			if got := s.Meta[k]; got != w {
				t.Errorf("meta %s = %q, want %q", k, got, w)
			}
		}
		if s.Address != "127.0.0.1" || addr(s.Port) != v.Listen {
			t.Errorf("address = %s:%d, want %s", s.Address, s.Port, v.Listen)
		}
		if len(s.Tags) != 1 || s.Tags[0] != e.Name {
			t.Errorf("tags = %v, want [%s]", s.Tags, e.Name)
		}
	})
}

// TestWaitsForEngine: vigil starts first, while the engine is down (nothing
// listens) or still loading (listening, NOT_SERVING); nothing is registered
// until the engine serves, and then within registerBound.
func TestWaitsForEngine(t *testing.T) {
	skipShort(t)
	forEachEngine(t, func(t *testing.T, e *engine) {
		for _, tc := range []struct {
			name    string
			loading bool
		}{
			{"engine down", false},
			{"engine loading", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := consulFor(t)
				svc := uniqueService(t)
				engineAddr := addr(freePort(t))
				var m *mock
				if tc.loading {
					m = startMock(t, e, harness.MockOpts{GRPC: engineAddr, StartupDelay: 3 * time.Second})
				}
				v := startVigil(t, vigilOpts{engine: e, engineAddr: engineAddr, consul: c, service: svc})
				v.waitLine("waiting for engine", 30*time.Second)
				if !tc.loading {
					// Let vigil's retry backoff reach its cap before the engine comes.
					time.Sleep(2 * time.Second)
					if c.catalogHas(t, svc) {
						t.Fatal("worker registered while the engine was down")
					}
					m = startMock(t, e, harness.MockOpts{GRPC: engineAddr})
				}
				m.waitLine("serving", 30*time.Second)
				_, seen := c.passing(t, svc, 30*time.Second, count(1))
				if d := seen.Sub(m.lastHealthChange(t)); d > registerBound {
					t.Errorf("registered %s after the engine served, want within %s", d, registerBound)
				}
				if v.exited() {
					t.Fatalf("vigil exited with %d", v.exitCode())
				}
			})
		}
	})
}

// TestFileRegistry: with the embedded file registry, the record appears
// with the engine's facts while the engine serves and is removed on loss.
func TestFileRegistry(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	svc := "llm"
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: svc})
	path := filepath.Join(dir, svc, v.WorkerID+".json")

	rec, _ := waitFile(t, path, true, 30*time.Second)
	if rec.Model != e.servedModel || rec.InstanceID != e.instanceID(m) || rec.Engine != e.Name || addr(rec.Port) != v.Listen {
		t.Errorf("record = %+v, want model %s, instance %s, engine %s, port of %s", rec, e.servedModel, e.instanceID(m), e.Name, v.Listen)
	}
	if !rec.Expires.After(time.Now()) {
		t.Errorf("record expires %s, want in the future", rec.Expires)
	}

	e.unhealthy.lose(t, m)
	if code := v.wait(exitBound); code != 1 {
		t.Fatalf("vigil exit code = %d, want 1", code)
	}
	waitFile(t, path, false, 0)
}

// TestEngineLost: the engine reports itself failed (NOT_SERVING for vLLM),
// or is killed, after registration; and it reports itself failed under each
// way its mock can answer a health Watch: vigil deregisters the worker
// itself, logs the loss and exits 1 within the grace period.
func TestEngineLost(t *testing.T) {
	skipShort(t)
	forEachEngine(t, func(t *testing.T, e *engine) {
		type lossCase struct {
			name     string
			mockArgs []string
			lose     func(t *testing.T, m *mock)
		}
		cases := []lossCase{
			{e.unhealthy.name, nil, e.unhealthy.lose},
			{"SIGKILL", nil, func(t *testing.T, m *mock) { m.signal(syscall.SIGKILL) }},
		}
		for _, w := range e.watchModes {
			cases = append(cases, lossCase{e.unhealthy.name + " " + w.name, w.args, e.unhealthy.lose})
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := consulFor(t)
				svc := uniqueService(t)
				m := startMock(t, e, harness.MockOpts{Extra: tc.mockArgs})
				// A TTL far longer than the test: only vigil's own
				// deregistration can empty the catalog in time.
				v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
				c.passing(t, svc, 30*time.Second, count(1))

				lost := time.Now()
				tc.lose(t, m)
				code := v.wait(exitBound)
				if code != 1 {
					t.Fatalf("vigil exit code = %d, want 1", code)
				}
				if d := time.Since(lost); d > 5*time.Second {
					t.Errorf("vigil exited %s after the loss, want within the 5s grace period", d)
				}
				v.waitLine(e.lostReason, 0)
				if c.catalogHas(t, svc) {
					t.Error("worker still in Consul after vigil exited: it did not deregister")
				}
				if !strings.Contains(v.findLine("engine lost"), "[ERROR]") {
					t.Errorf("loss not logged at error level: %q", v.findLine("engine lost"))
				}
			})
		}
	})
}

// TestNotReady: an engine that sleeps or pauses is withdrawn but not lost,
// and registered again when it wakes or resumes, in each way the engine
// has.
func TestNotReady(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		if len(e.notReady) == 0 {
			t.Skip("the engine has no sleep or pause")
		}
		for _, way := range e.notReady {
			t.Run(way.name, func(t *testing.T) {
				t.Parallel()
				c := consulFor(t)
				svc := uniqueService(t)
				m := startMock(t, e, harness.MockOpts{})
				v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
				c.passing(t, svc, 30*time.Second, count(1))

				m.post(t, way.enter, nil)
				_, gone := c.passing(t, svc, 10*time.Second, count(0))
				if d := gone.Sub(m.lastHealthChange(t)); d > registerBound {
					t.Errorf("withdrawn %s after %s, want within %s", d, way.enter, registerBound)
				}
				m.post(t, way.leave, nil)
				_, back := c.passing(t, svc, 10*time.Second, count(1))
				if d := back.Sub(m.lastHealthChange(t)); d > registerBound {
					t.Errorf("registered again %s after %s, want within %s", d, way.leave, registerBound)
				}
				if v.exited() {
					t.Fatalf("vigil exited with %d during %s and %s", v.exitCode(), way.enter, way.leave)
				}
				if l := v.findLine("engine lost"); l != "" {
					t.Errorf("vigil logged a loss for an engine that was only not ready (%s): %s", way.name, l)
				}
			})
		}
	})
}

// TestStartupDeadline: an engine that never serves makes vigil exit 1
// without ever registering.
func TestStartupDeadline(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{StartupDelay: time.Hour})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--startup-deadline", "2s"}})
		if code := v.wait(exitBound + 2*time.Second); code != 1 {
			t.Fatalf("vigil exit code = %d, want 1", code)
		}
		v.waitLine("startup deadline", 0)
		if l := v.findLine("worker registered"); l != "" {
			t.Errorf("vigil registered the worker: %s", l)
		}
		if c.catalogHas(t, svc) {
			t.Error("worker in Consul after a startup deadline failure")
		}
	})
}

// TestSIGTERM: a registered worker is withdrawn before vigil exits 0; during
// the startup wait vigil exits 0 at once with nothing registered.
func TestSIGTERM(t *testing.T) {
	skipShort(t)
	t.Run("registered", func(t *testing.T) {
		t.Parallel()
		e := firstEngine()
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
		c.passing(t, svc, 30*time.Second, count(1))
		v.term(t)
		if code := v.wait(exitBound); code != 0 {
			t.Fatalf("vigil exit code = %d, want 0", code)
		}
		if c.catalogHas(t, svc) {
			t.Error("worker still in Consul after SIGTERM")
		}
		if m.exited() {
			t.Error("vigil's stop stopped the engine too")
		}
	})
	t.Run("startup wait", func(t *testing.T) {
		t.Parallel()
		c := consulFor(t)
		svc := uniqueService(t)
		v := startVigil(t, vigilOpts{engine: firstEngine(), engineAddr: addr(freePort(t)), consul: c, service: svc})
		v.waitLine("waiting for engine", 30*time.Second)
		sent := time.Now()
		v.term(t)
		if code := v.wait(exitBound); code != 0 {
			t.Fatalf("vigil exit code = %d, want 0", code)
		}
		if d := time.Since(sent); d > 2*time.Second {
			t.Errorf("vigil took %s to exit, want within 2s", d)
		}
		if c.catalogHas(t, svc) {
			t.Error("worker registered during the startup wait")
		}
	})
}

// TestVigilKilled: SIGKILL leaves no adapter process behind, and Consul's
// TTL check turns critical on its own.
func TestVigilKilled(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := consulFor(t)
	svc := uniqueService(t)
	e := firstEngine()
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
	c.passing(t, svc, 30*time.Second, count(1))
	adapters := children(v.pid())
	if len(adapters) == 0 {
		t.Fatal("vigil has no adapter child process")
	}
	v.signal(syscall.SIGKILL)
	v.wait(exitBound)
	killed := time.Now()
	for _, pid := range adapters {
		for alive(pid) {
			if time.Since(killed) > 2*time.Second {
				t.Fatalf("adapter process %d still running 2s after vigil was killed", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// TTL 5s: critical within the TTL plus the agent's reaping slack.
	c.passing(t, svc, 5*time.Second+registerBound, count(0))
	checks, _, err := c.Client.Health().Checks(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 1 || checks[0].Status != api.HealthCritical {
		t.Errorf("checks = %v, want one critical TTL check", checks)
	}
}

// TestConsulRestart: a dev agent restarted under a registered worker loses
// the registration; vigil registers again within the TTL plus 2s and never
// exits.
func TestConsulRestart(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := startConsul(t) // its own agent: the restart must not disturb others
	svc := uniqueService(t)
	e := firstEngine()
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
	c.passing(t, svc, 30*time.Second, count(1))

	c.restart()
	restarted := time.Now()
	c.passing(t, svc, 5*time.Second+registerBound+5*time.Second, count(1))
	if d := time.Since(restarted); d > 5*time.Second+registerBound {
		t.Errorf("registered again %s after the agent restarted, want within the TTL plus 2s", d)
	}
	if v.exited() {
		t.Fatalf("vigil exited with %d when Consul restarted", v.exitCode())
	}
}

// TestThirdPartyAdapter: an adapter shipped as its own executable
// (--engine-plugin) registers the worker like a built-in one, and exits when
// vigil is killed, as sdk.Serve promises every adapter.
func TestThirdPartyAdapter(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		if e.adapterBin == "" {
			t.Skip("the engine has no adapter executable")
		}
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--engine-plugin", e.adapterBin}})
		c.passing(t, svc, 30*time.Second, count(1))
		adapters := children(v.pid())
		if len(adapters) != 1 {
			t.Fatalf("vigil has %d child processes, want the adapter alone", len(adapters))
		}
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", adapters[0])); exe != e.adapterBin {
			t.Errorf("adapter process runs %q, want %q", exe, e.adapterBin)
		}
		v.signal(syscall.SIGKILL)
		v.wait(exitBound)
		killed := time.Now()
		for alive(adapters[0]) {
			if time.Since(killed) > 2*time.Second {
				t.Fatal("third-party adapter still running 2s after vigil was killed")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
