package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// withdrawals is the sum of vigil_worker_withdrawals_total over its causes.
func withdrawals(t *testing.T, metricsAddr string) float64 {
	t.Helper()
	var n float64
	for k, v := range scrape(t, metricsAddr) {
		if strings.HasPrefix(k, "vigil_worker_withdrawals_total{") {
			n += v
		}
	}
	return n
}

// TestBusyEngineStaysRegistered: a vLLM engine whose health Checks answer
// in 2 s for 15 s, past the default --health-timeout (1s), while its
// HTTP/2 transport answers PINGs, is busy, not lost: the worker stays
// registered, nothing is withdrawn, vigil_engine_busy shows it, and it
// clears once the Checks answer in time again.
func TestBusyEngineStaysRegistered(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	metricsAddr := addr(freePort(t))
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--metrics-listen", metricsAddr}})
	c.passing(t, svc, 30*time.Second, count(1))
	awaitMetric(t, metricsAddr, "vigil_worker_registered", 1, 10*time.Second)

	m.post(t, "/check-latency", map[string]string{"latency": "2s"})
	busySince := time.Now()
	awaitMetric(t, metricsAddr, "vigil_engine_busy", 1, 10*time.Second)
	t.Logf("busy reported %s after the Checks slowed", time.Since(busySince).Round(time.Millisecond))
	// The busy period itself is what is tested: no event marks its end.
	time.Sleep(15*time.Second - time.Since(busySince))
	if n := withdrawals(t, metricsAddr); n != 0 {
		t.Errorf("withdrawals after 15 s busy = %v, want 0", n)
	}
	if v.exited() {
		t.Fatalf("vigil exited (code %d) while its engine was busy:\n%s", v.exitCode(), v.output())
	}
	c.passing(t, svc, time.Second, count(1))
	m.post(t, "/check-latency", map[string]string{"latency": "0"})
	awaitMetric(t, metricsAddr, "vigil_engine_busy", 0, 10*time.Second)
	if got := scrape(t, metricsAddr)["vigil_engine_busy_episodes_total"]; got != 1 {
		t.Errorf("vigil_engine_busy_episodes_total = %v, want 1", got)
	}
	if v.findLine("engine busy") == "" {
		t.Error("no log line for the busy engine")
	}
	v.term(t)
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}

// TestHealthBlipsConfirmed: 20 blips of "" NOT_SERVING, 200 ms each, with
// --health-confirm 500ms, withdraw nothing and vigil keeps serving; the
// same blip held past it is a loss.
func TestHealthBlipsConfirmed(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	metricsAddr := addr(freePort(t))
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--metrics-listen", metricsAddr, "--health-confirm", "500ms"}})
	c.passing(t, svc, 30*time.Second, count(1))
	awaitMetric(t, metricsAddr, "vigil_worker_registered", 1, 10*time.Second)
	for range 20 {
		m.setHealth(t, "", "NOT_SERVING")
		time.Sleep(200 * time.Millisecond) // the blip: its length is the stimulus
		m.setHealth(t, "", "SERVING")
		time.Sleep(100 * time.Millisecond)
	}
	if got := scrape(t, metricsAddr)[`vigil_worker_withdrawals_total{cause="lost"}`]; got != 0 {
		t.Errorf(`vigil_worker_withdrawals_total{cause="lost"} after 20 blips = %v, want 0`, got)
	}
	if n := withdrawals(t, metricsAddr); n != 0 {
		t.Errorf("withdrawals after 20 blips = %v, want 0", n)
	}
	if v.exited() {
		t.Fatalf("vigil exited (code %d) on a blip shorter than --health-confirm:\n%s", v.exitCode(), v.output())
	}
	held := time.Now()
	m.setHealth(t, "", "NOT_SERVING")
	if code := v.wait(exitBound + time.Second); code != 1 {
		t.Errorf("vigil exit code after a NOT_SERVING held past --health-confirm = %d, want 1", code)
	}
	if took := time.Since(held); took < 500*time.Millisecond {
		t.Errorf("loss after %v, want not before --health-confirm 500ms", took)
	}
}
