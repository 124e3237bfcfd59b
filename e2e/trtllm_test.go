package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// trtllmCases are TensorRT-LLM's own cases: a server that stays up after
// a rank crash, reporting unhealthy forever, or whose HealthCheck stops
// answering, is found by polling alone; and with no lifetime id, an engine
// restarted where no poll can see it is told by its connection.
var trtllmCases = []engineCase{
	{"crashed rank, never exiting", trtllmStuck(trtllmCrashedRank)},
	{"hung HealthCheck", trtllmStuck(trtllmHungHealthCheck)},
	{"unhealthy from the start", trtllmUnhealthyFromStart},
	{"restarted between two polls", trtllmRestartedBetweenPolls},
}

// healthFlags are vigil's --health-* flags.
type healthFlags struct {
	interval, timeout time.Duration
	failures          int
}

func (h healthFlags) args() []string {
	return []string{"--health-interval", h.interval.String(), "--health-timeout", h.timeout.String(),
		"--health-failures", fmt.Sprint(h.failures)}
}

// trtllmHealth are the health flags of the stuck-engine cases, none the
// default, so that the bounds show vigil following the flags.
var trtllmHealth = healthFlags{interval: 200 * time.Millisecond, timeout: 500 * time.Millisecond, failures: 3}

// stuckWay is a way a TensorRT-LLM server stops serving without exiting.
type stuckWay struct {
	// stick turns the running engine m stuck and returns when it did,
	// by the mock's clock or from just before asking it.
	stick func(t *testing.T, m *mock) time.Time
	// bound is how soon after that vigil must have withdrawn the worker.
	bound time.Duration
	// why is what the loss's log line names besides HealthCheck.
	why string
	// extra are more vigil run flags.
	extra []string
}

// trtllmCrashedRank: HealthCheck answers a description (a crashed rank)
// from now on: withdrawn within interval x failures + 1 s.
var trtllmCrashedRank = stuckWay{
	stick: func(t *testing.T, m *mock) time.Time {
		m.setHealth(t, "", "NOT_SERVING")
		return m.lastHealthChange(t)
	},
	bound: trtllmHealth.interval*time.Duration(trtllmHealth.failures) + time.Second,
	why:   "unhealthy: executor error",
}

// trtllmBusyTimeout is the hung case's --health-busy-timeout.
const trtllmBusyTimeout = time.Second

// trtllmHungHealthCheck: HealthCheck stops answering while the server's
// transport answers PINGs: busy, until --health-busy-timeout; then each
// poll ends at its deadline, so withdrawn within interval + timeout (the
// episode's first poll) + the busy timeout + failures x timeout + 1 s.
var trtllmHungHealthCheck = stuckWay{
	stick: func(t *testing.T, m *mock) time.Time {
		at := time.Now()
		m.post(t, "/health-check", map[string]string{"mode": "hang"})
		return at
	},
	bound: trtllmHealth.interval + time.Duration(trtllmHealth.failures+1)*trtllmHealth.timeout + trtllmBusyTimeout + time.Second,
	why:   "busy timeout",
	extra: []string{"--health-busy-timeout", trtllmBusyTimeout.String()},
}

// trtllmStuck: the engine, registered, gets stuck in way w and never exits.
// Nothing would restart it: vigil must withdraw the worker itself within
// w.bound, log the loss at error level naming HealthCheck and why, and
// exit 1, while the engine process runs on.
func trtllmStuck(w stuckWay) func(t *testing.T, e *engine) {
	return func(t *testing.T, e *engine) {
		c := consulFor(t)
		svc := uniqueService(t)
		m := startMock(t, e, harness.MockOpts{})
		// A TTL far longer than the test: only vigil's own deregistration
		// can empty the catalog in time.
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
			extra: append(append([]string{"--check-ttl", "5m"}, trtllmHealth.args()...), w.extra...)})
		c.passing(t, svc, 30*time.Second, count(1))

		stuck := w.stick(t, m)
		_, gone := c.passing(t, svc, exitBound, count(0))
		d := gone.Sub(stuck)
		if d > w.bound {
			t.Errorf("withdrawn %s after the engine got stuck, want within %s", d, w.bound)
		}
		t.Logf("withdrawn %s after the engine got stuck (bound %s)", d, w.bound)
		if code := v.wait(exitBound); code != 1 {
			t.Fatalf("vigil exit code = %d, want 1", code)
		}
		lost := v.findLine("engine lost")
		for _, want := range []string{"[ERROR]", e.lostReason, "HealthCheck", w.why} {
			if !strings.Contains(lost, want) {
				t.Errorf("engine lost line %q does not hold %q", lost, want)
			}
		}
		if c.catalogHas(t, svc) {
			t.Error("worker still in Consul after vigil exited: it did not deregister")
		}
		if m.exited() {
			t.Errorf("the engine exited (%d): the case needs it up, stuck", m.exitCode())
		}
	}
}

// trtllmUnhealthyFromStart: an engine that reports a crashed rank from the
// start (it listens and answers, but never "OK") is never registered, and
// vigil exits 1 at the startup deadline naming HealthCheck's answer.
func trtllmUnhealthyFromStart(t *testing.T, e *engine) {
	m := startMock(t, e, harness.MockOpts{Extra: []string{"--health-check", "unhealthy"}})
	m.waitLine("serving", harness.StartTimeout)
	neverServes(t, e, m, "HealthCheck", "rank 1 crashed")
}

// trtllmRestartedBetweenPolls: the engine is killed (SIGKILL) and a new one
// started on its port while no poll can fall between (--health-interval
// 1h), and the new one serves: its HealthCheck would answer "OK", and
// TensorRT-LLM has no lifetime id. The connection closing is all vigil
// has, and it must take it for the loss: withdrawn within registerBound
// of the kill, the loss naming the connection, exit 1.
func trtllmRestartedBetweenPolls(t *testing.T, e *engine) {
	c := consulFor(t)
	svc := uniqueService(t)
	old := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: old.GRPC, consul: c, service: svc,
		extra: []string{"--check-ttl", "5m", "--health-interval", "1h"}})
	c.passing(t, svc, 30*time.Second, count(1))

	killed := time.Now()
	old.signal(syscall.SIGKILL)
	old.wait(exitBound)
	startMock(t, e, harness.MockOpts{GRPC: old.GRPC}).waitLine("serving", harness.StartTimeout)
	_, gone := c.passing(t, svc, exitBound, count(0))
	d := gone.Sub(killed)
	if d > registerBound {
		t.Errorf("withdrawn %s after the engine was killed, want within %s", d, registerBound)
	}
	t.Logf("withdrawn %s after the engine was killed (bound %s)", d, registerBound)
	if code := v.wait(exitBound); code != 1 {
		t.Fatalf("vigil exit code = %d, want 1", code)
	}
	lost := v.findLine("engine lost")
	for _, want := range []string{"[ERROR]", e.lostReason, "engine connection closed", "no lifetime id"} {
		if !strings.Contains(lost, want) {
			t.Errorf("engine lost line %q does not hold %q", lost, want)
		}
	}
	if c.catalogHas(t, svc) {
		t.Error("worker still in Consul after vigil exited: it did not deregister")
	}
}
