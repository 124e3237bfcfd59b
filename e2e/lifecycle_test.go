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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Behavioural bounds, with slack for a loaded 2-core machine under -race;
// the real figures are in the benchmarks.
const (
	registerBound = 2 * time.Second
	exitBound     = 10 * time.Second
	// notReadyBound bounds the withdrawal when the engine stops taking
	// work (sleep, pause) and the registration when it takes it again: an
	// engine paused for a moment must not lose its traffic for long.
	notReadyBound = time.Second
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

// TestEngineReplacedOnSamePort: while vigil learns the engine's health by
// polling alone (a health Watch that sends one status and ends, answers
// UNIMPLEMENTED, or sends nothing), the engine is replaced by another one
// at the same address between two polls, and the new engine serves, so
// health alone looks fine. The registration carries the old engine's
// instance id and vouches for an engine that no longer exists: vigil must
// deregister the worker, log the loss and exit 1, so that its supervisor
// restarts it against the new engine. The engine is replaced in two ways:
//   - restarted: killed (SIGKILL) and a new engine started on its port at
//     once, as a supervisor restarting a crashed engine does;
//   - old engine still up: the address leads to another engine from the
//     next connection on (a port-forward or load balancer moved to a new
//     engine), the old one serving on.
func TestEngineReplacedOnSamePort(t *testing.T) {
	skipShort(t)
	forEachEngine(t, func(t *testing.T, e *engine) {
		if len(e.pollOnly) == 0 {
			t.Skip("vigil always follows this engine's health by a stream")
		}
		for _, w := range e.pollOnly {
			t.Run(w.name, func(t *testing.T) {
				t.Parallel()
				// replaced checks what vigil does once old is replaced by
				// another engine at the address vigil was given.
				replaced := func(t *testing.T, c *consulAgent, svc string, v *vigil, old *mock) {
					t.Helper()
					if _, _, err := v.proc.Wait(exitBound); err != nil {
						t.Fatalf("vigil still running %s after the engine was replaced, its worker registered with the old engine's instance id %q", exitBound, e.instanceID(old))
					}
					if code := v.wait(exitBound); code != 1 {
						t.Fatalf("vigil exit code = %d after the engine was replaced, want 1", code)
					}
					lost := v.findLine("engine lost")
					if !strings.Contains(lost, e.lostReason) || !strings.Contains(lost, "[ERROR]") {
						t.Errorf("engine lost line %q, want %q at error level", lost, e.lostReason)
					}
					if c.catalogHas(t, svc) {
						t.Errorf("worker with the old engine's instance id %q still in Consul after vigil exited", e.instanceID(old))
					}
				}

				t.Run("restarted", func(t *testing.T) {
					t.Parallel()
					c := consulFor(t)
					svc := uniqueService(t)
					old := startMock(t, e, harness.MockOpts{Extra: w.args})
					// A TTL far longer than the test: only vigil's own
					// deregistration can empty the catalog in time.
					v := startVigil(t, vigilOpts{engine: e, engineAddr: old.GRPC, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
					registeredWith(t, c, svc, e.instanceID(old))

					old.signal(syscall.SIGKILL)
					old.wait(exitBound)
					next := startMock(t, e, harness.MockOpts{GRPC: old.GRPC, Extra: w.args})
					replaced(t, c, svc, v, old)
					// Either the reconnect found the new engine (a new
					// instance id) or it raced the restart (the engine
					// unreachable): both are a loss.
					t.Logf("replaced by %s: %s", next.InstanceID, v.findLine("engine lost"))
				})

				t.Run("old engine still up", func(t *testing.T) {
					t.Parallel()
					c := consulFor(t)
					svc := uniqueService(t)
					old := startMock(t, e, harness.MockOpts{Extra: w.args})
					next := startMock(t, e, harness.MockOpts{Extra: w.args})
					next.waitLine("serving", harness.StartTimeout)
					p := startTCPProxy(t, old.GRPC)
					v := startVigil(t, vigilOpts{engine: e, engineAddr: p.addr, consul: c, service: svc, extra: []string{"--check-ttl", "5m"}})
					registeredWith(t, c, svc, e.instanceID(old))

					p.moveTo(next.GRPC)
					replaced(t, c, svc, v, old)
					// The reconnect reaches the new engine, whose lifetime
					// id tells it apart; a health check cut short by the
					// move (vigil's first ones, right after it registers)
					// may tell first, and is a loss too.
					lost := v.findLine("engine lost")
					if e.lifetimeID && strings.Contains(lost, "replaced") &&
						(!strings.Contains(lost, e.instanceID(next)) || !strings.Contains(lost, e.instanceID(old))) {
						t.Errorf("engine lost line %q does not name the new and the old instance id (%s, %s)", lost, e.instanceID(next), e.instanceID(old))
					}
					t.Logf("replaced by %s: %s", next.InstanceID, lost)
					if old.exited() {
						t.Errorf("the old engine exited (%d): the scenario needs it up", old.exitCode())
					}
				})
			})
		}
	})
}

// registeredWith waits until one instance of service passes, and checks
// that it carries instanceID.
func registeredWith(t *testing.T, c *consulAgent, service, instanceID string) {
	t.Helper()
	entries, _ := c.passing(t, service, 30*time.Second, count(1))
	if got := entries[0].Service.Meta["instance_id"]; got != instanceID {
		t.Fatalf("registered with instance_id %q, want %q", got, instanceID)
	}
}

// TestLossWhileRegistering: a loss that arrives while the worker's
// registration is in flight (sent, not yet answered) is followed by a
// withdrawal before vigil exits: the registration lands, and vigil
// deregisters it, so no worker is left in Consul for a lost engine. The
// Consul agent is reached through a gate that holds the registration until
// vigil has logged the loss.
func TestLossWhileRegistering(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	g := startConsulGate(t, c)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: g.agent, service: svc, extra: []string{"--check-ttl", "5m"}})
	select {
	case <-g.held:
	case <-v.proc.Done():
		t.Fatalf("vigil exited with %d before registering", v.exitCode())
	case <-time.After(30 * time.Second):
		t.Fatal("vigil sent no registration within 30s")
	}

	e.unhealthy.lose(t, m)
	v.waitLine("engine lost", exitBound)
	g.releaseRegistration()
	if code := v.wait(exitBound); code != 1 {
		t.Fatalf("vigil exit code = %d, want 1", code)
	}
	ops := g.forwarded()
	if len(ops) != 2 || ops[0] != "register 200 OK" || ops[1] != "deregister 200 OK" {
		t.Errorf("agent writes = %q, want the registration to land and then its deregistration", ops)
	}
	if c.catalogHas(t, svc) {
		t.Error("worker in Consul after vigil exited: the registration that landed after the loss was not withdrawn")
	}
}

// TestNotReady: an engine that sleeps or pauses is withdrawn within
// notReadyBound but not lost, and registered again within notReadyBound
// when it wakes or resumes, in each way the engine has.
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

				sent := time.Now()
				m.post(t, way.enter, nil)
				_, gone := c.passing(t, svc, 10*time.Second, count(0))
				if d := gone.Sub(changedSince(t, m, sent)); d > notReadyBound {
					t.Errorf("withdrawn %s after %s, want within %s", d, way.enter, notReadyBound)
				}
				sent = time.Now()
				m.post(t, way.leave, nil)
				_, back := c.passing(t, svc, 10*time.Second, count(1))
				if d := back.Sub(changedSince(t, m, sent)); d > notReadyBound {
					t.Errorf("registered again %s after %s, want within %s", d, way.leave, notReadyBound)
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

// changedSince is when mock m changed in answer to a control request sent
// at sent: the time the mock recorded for its last health change, when it
// recorded one since; else sent, which is earlier than the change, so a
// delay measured from it is never too short. (sglang-mock records no
// change of is_pause, which changes no health status of its.)
func changedSince(t *testing.T, m *mock, sent time.Time) time.Time {
	t.Helper()
	if at := m.lastHealthChange(t); at.After(sent) {
		return at
	}
	return sent
}

// TestEngineFrozen: the engine's process is stopped (SIGSTOP), its
// connections left open, so it neither answers nor closes anything and
// only vigil's own liveness checks can notice. The worker is withdrawn
// within the health policy's bound, interval + failures × timeout, plus
// registerBound of slack, and vigil logs the loss and exits 1.
func TestEngineFrozen(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		const (
			interval = 500 * time.Millisecond
			timeout  = time.Second
			failures = 2
		)
		// One PING, unanswered, waits a quarter of the timeout.
		bound := interval + failures*timeout + timeout/4 + registerBound
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		// A TTL far longer than the test: only vigil's own deregistration
		// can empty the catalog in time.
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{
			"--check-ttl", "5m", "--health-interval", interval.String(), "--health-timeout", timeout.String(),
			"--health-failures", fmt.Sprint(failures)}})
		c.passing(t, svc, 30*time.Second, count(1))

		frozen := time.Now()
		m.signal(syscall.SIGSTOP) // the cleanup's SIGKILL ends a stopped process too
		_, gone := c.passing(t, svc, bound+exitBound, count(0))
		if d := gone.Sub(frozen); d > bound {
			t.Errorf("withdrawn %s after the engine froze, want within %s", d, bound)
		}
		if code := v.wait(exitBound); code != 1 {
			t.Fatalf("vigil exit code = %d after the engine froze, want 1", code)
		}
		if lost := v.findLine("engine lost"); !strings.Contains(lost, e.lostReason) || !strings.Contains(lost, "[ERROR]") {
			t.Errorf("engine lost line %q, want %q at error level", lost, e.lostReason)
		}
	})
}

// TestAdapterFrozen: vLLM's adapter process (vigil re-executed) is
// stopped (SIGSTOP, as a deadlock, a swap stall or a wedged server would
// freeze it) while it serves requests: it answers nothing and closes
// nothing, so go-plugin, which reports only an exit, never tells. vigil's
// pings of the adapter find it within interval + failures × timeout:
// the file record is gone, the requests in flight end with UNAVAILABLE,
// vigil logs the loss, kills the adapter and exits 1 within that bound and
// a moment, no process of its left behind; the engine, its streams closed
// by the kill, stops generating them.
func TestAdapterFrozen(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	if e.Name != "vllm" {
		t.Fatalf("first engine %s, want vllm", e.Name)
	}
	const (
		interval = 200 * time.Millisecond
		timeout  = 500 * time.Millisecond
		failures = 2
	)
	bound := interval + failures*timeout + registerBound
	dir := t.TempDir()
	m := startMock(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm", extra: []string{
		"--health-interval", interval.String(), "--health-timeout", timeout.String(), "--health-failures", fmt.Sprint(failures)}})
	path := filepath.Join(dir, "llm", v.WorkerID+".json")
	waitFile(t, path, true, 30*time.Second)
	adapters := children(v.pid())
	if len(adapters) != 1 {
		t.Fatalf("vigil has %d child processes, want its adapter alone", len(adapters))
	}
	t.Cleanup(func() { // a stopped process left by a failure
		_ = syscall.Kill(adapters[0], syscall.SIGCONT)
		_ = syscall.Kill(adapters[0], syscall.SIGKILL)
	})
	inflight := startLoad(t, e, v, 2)

	frozen := time.Now()
	if err := syscall.Kill(adapters[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, gone := waitFile(t, path, false, bound+exitBound); gone.Sub(frozen) > bound {
		t.Errorf("record removed %s after the adapter froze, want within %s", gone.Sub(frozen), bound)
	} else {
		t.Logf("record removed %s after the adapter froze", gone.Sub(frozen).Round(time.Millisecond))
	}
	for i, r := range inflight.wait(t, bound) {
		if status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "not answering") {
			t.Errorf("request in flight %d ended with %v after %d tokens, want Unavailable saying the adapter is not answering", i, r.err, len(r.tokens))
		}
	}
	if d := time.Since(frozen); d > bound {
		t.Errorf("the requests in flight ended %s after the adapter froze, want within %s", d, bound)
	}
	if code := v.wait(exitBound); code != 1 {
		t.Fatalf("vigil exit code = %d after its adapter froze, want 1", code)
	}
	if d := time.Since(frozen); d > bound+time.Second {
		t.Errorf("vigil exited %s after the adapter froze, want within %s", d, bound+time.Second)
	} else {
		t.Logf("vigil exited %s after the adapter froze", d.Round(time.Millisecond))
	}
	if l := v.findLine("engine lost"); !strings.Contains(l, "[ERROR]") || !strings.Contains(l, "not answering") {
		t.Errorf("loss line %q, want an error saying the adapter is not answering", l)
	}
	if alive(adapters[0]) {
		t.Errorf("the frozen adapter %d is still running", adapters[0])
	}
	if left := harness.GroupMembers(v.pid()); len(left) > 0 {
		t.Errorf("processes %v of vigil's left running after it exited", left)
	}
	for m.state(t).InFlight > 0 {
		if time.Since(frozen) > bound+exitBound {
			t.Fatalf("the engine still generates %d requests %s after the adapter froze", m.state(t).InFlight, time.Since(frozen))
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// TestStartupWaitsForLiveness: an engine alive and ready whose liveness
// signal reports failure (vLLM: "" NOT_SERVING while "vllm.Inference" and
// "vllm.Control" serve) does not serve, whatever its other signals say.
// While that holds vigil waits: it logs no "engine serving" and registers
// nothing (registering would be followed by a withdrawal at once, and,
// under a supervisor that restarts vigil, flap the registration). If the
// signal never clears vigil exits 1 at the startup deadline, naming it; if
// it clears within the deadline, vigil registers then and stays up.
func TestStartupWaitsForLiveness(t *testing.T) {
	skipShort(t)
	forEachEngine(t, func(t *testing.T, e *engine) {
		if e.livenessFails.fail == nil {
			t.Skip("the engine has no liveness signal apart from readiness")
		}
		// failingEngine is alive and ready, its liveness signal failing,
		// before vigil starts.
		failingEngine := func(t *testing.T) *mock {
			m := startMock(t, e, harness.MockOpts{})
			m.waitLine("serving", harness.StartTimeout)
			e.livenessFails.fail(t, m)
			return m
		}

		t.Run("never clears", func(t *testing.T) {
			t.Parallel()
			neverServes(t, e, failingEngine(t), e.livenessFails.signal)
		})

		t.Run("clears while vigil waits", func(t *testing.T) {
			t.Parallel()
			c := consulFor(t)
			svc := uniqueService(t)
			m := failingEngine(t)
			passed, stopWatch := neverPassing(t, c, svc)
			v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
				extra: []string{"--startup-deadline", "1m"}})
			v.waitLine("waiting for engine", harness.StartTimeout)
			// No event tells that vigil has looked at the engine and
			// declined it; an engine that serves is registered within
			// registerBound, so the failing signal is held that long.
			select {
			case <-passed:
			case <-v.proc.Done():
			case <-time.After(registerBound):
			}
			stopWatch()
			if v.exited() {
				t.Fatalf("vigil exited with %d while waiting for the engine's liveness signal to clear", v.exitCode())
			}
			if l := v.findLine("engine serving"); l != "" {
				t.Fatalf("vigil logged the engine serving while its liveness signal reported failure: %s", l)
			}

			e.livenessFails.clear(t, m)
			_, seen := c.passing(t, svc, 30*time.Second, count(1))
			if d := seen.Sub(m.lastHealthChange(t)); d > registerBound {
				t.Errorf("registered %s after the liveness signal cleared, want within %s", d, registerBound)
			}
			if v.exited() {
				t.Fatalf("vigil exited with %d", v.exitCode())
			}
			if l := v.findLine("engine lost"); l != "" {
				t.Errorf("vigil logged a loss: %s", l)
			}
		})
	})
}

// neverServes starts vigil with a 2s startup deadline against m, whose
// engine listens but never serves, and checks that vigil exits 1 at the
// deadline with a line naming each of why, having logged no "engine
// serving" and registered nothing (its worker never passing in Consul,
// watched from before vigil starts).
func neverServes(t *testing.T, e *engine, m *mock, why ...string) {
	t.Helper()
	c := consulFor(t)
	svc := uniqueService(t)
	_, stopWatch := neverPassing(t, c, svc)
	const deadline = 2 * time.Second
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--startup-deadline", deadline.String()}})
	code := v.wait(exitBound + deadline)
	stopWatch()
	exitAt, _, _ := v.proc.Wait(time.Second) // exited: returns at once
	if code != 1 {
		t.Errorf("vigil exit code = %d, want 1", code)
	}
	if d := exitAt.Sub(v.Started); d < deadline {
		t.Errorf("vigil exited %s after it started, before the %s startup deadline", d, deadline)
	}
	line := v.findLine("startup deadline")
	for _, w := range why {
		if !strings.Contains(line, w) {
			t.Errorf("startup deadline line %q does not name %s", line, w)
		}
	}
	for _, s := range []string{"engine serving", "worker registered"} {
		if l := v.findLine(s); l != "" {
			t.Errorf("vigil logged %q while the engine did not serve: %s", s, l)
		}
	}
	if c.catalogHas(t, svc) {
		t.Error("worker in Consul after the startup deadline")
	}
}

// TestSIGTERM: a registered worker is withdrawn before vigil exits 0; during
// the startup wait (and the other startup phases: TestSignalDuringStartup)
// vigil exits 0 at once with nothing registered.
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
}

// TestSignalDuringStartup: SIGTERM in each startup phase (the adapter
// launching, the engine awaited, the worker registering) exits 0 within
// 2s, with nothing in Consul and no adapter process left behind.
func TestSignalDuringStartup(t *testing.T) {
	skipShort(t)
	e := firstEngine()
	for _, tc := range []struct {
		name string
		// start starts vigil and returns once it is in the phase.
		start func(t *testing.T, o vigilOpts) *vigil
	}{
		{"adapter launching", func(t *testing.T, o vigilOpts) *vigil {
			// An adapter that never answers go-plugin's handshake.
			plugin := filepath.Join(t.TempDir(), "silent-adapter")
			if err := os.WriteFile(plugin, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			o.engineAddr = addr(freePort(t))
			o.extra = []string{"--engine-plugin", plugin, "--log-level", "debug"}
			v := startVigil(t, o)
			v.waitLine("plugin started", 30*time.Second)
			return v
		}},
		{"engine waiting", func(t *testing.T, o vigilOpts) *vigil {
			o.engineAddr = addr(freePort(t))
			v := startVigil(t, o)
			v.waitLine("waiting for engine", 30*time.Second)
			return v
		}},
		{"registering", func(t *testing.T, o vigilOpts) *vigil {
			m := startMock(t, e, harness.MockOpts{})
			m.waitLine("serving", harness.StartTimeout)
			o.engineAddr = m.GRPC
			v := startVigil(t, o)
			v.waitLine("engine serving", 30*time.Second)
			return v
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := consulFor(t)
			svc := uniqueService(t)
			v := tc.start(t, vigilOpts{engine: e, consul: c, service: svc})
			adapters := children(v.pid())
			sent := time.Now()
			v.term(t)
			if code := v.wait(exitBound); code != 0 {
				t.Fatalf("vigil exit code = %d, want 0", code)
			}
			if d := time.Since(sent); d > 2*time.Second {
				t.Errorf("vigil took %s to exit, want within 2s", d)
			}
			if c.catalogHas(t, svc) {
				t.Error("worker in Consul after vigil exited")
			}
			for _, pid := range adapters {
				if alive(pid) {
					t.Errorf("adapter process %d still running after vigil exited", pid)
				}
			}
		})
	}
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
