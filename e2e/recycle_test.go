package e2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// TestRecycledConnections: an engine whose server recycles its gRPC
// connections (MaxConnectionAge with a grace, as engines configured so and
// proxies that limit connection lifetimes do) ends the health Watch with
// GOAWAY and then the connection's close every period. That is no loss:
// vigil reopens the Watch on the new connection, reads the same lifetime
// id, and stays registered over many periods; SIGTERM then ends it with
// exit 0.
func TestRecycledConnections(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	if !e.lifetimeID {
		t.Fatalf("%s: want an engine with a lifetime id first", e.Name)
	}
	const period, grace, periods = 300 * time.Millisecond, 300 * time.Millisecond, 10
	m := startMock(t, e, harness.MockOpts{Extra: []string{"--max-connection-age", period.String(), "--max-connection-age-grace", grace.String()}})
	dir := t.TempDir()
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm"})
	path := filepath.Join(dir, "llm", v.WorkerID+".json")
	waitFile(t, path, true, 30*time.Second)

	// Watching the record over the periods is the assertion itself: each
	// one ends a Watch stream, which vigil took for a loss before.
	end := time.Now().Add(periods * (period + grace))
	for time.Now().Before(end) {
		if v.exited() {
			t.Fatalf("vigil exited (%d) while the engine recycled its connections: %s", v.exitCode(), v.findLine("engine lost"))
		}
		if rec, _ := waitFile(t, path, true, 0); rec.InstanceID != e.instanceID(m) {
			t.Fatalf("record instance id %q, want %q", rec.InstanceID, e.instanceID(m))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lost := v.findLine("engine lost"); lost != "" {
		t.Errorf("vigil logged a loss while the engine recycled its connections: %s", lost)
	}
	v.signal(syscall.SIGTERM)
	if code := v.wait(exitBound); code != 0 {
		t.Fatalf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}
