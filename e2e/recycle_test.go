package e2e

import (
	"path/filepath"
	"strings"
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

// TestTwoEnginesOnOnePort: an old vLLM process, NOT_SERVING, still listens
// on the engine's port beside its replacement (SO_REUSEPORT, Python gRPC
// servers' default), and vigil's first connection reaches the old one.
// vigil opens a new connection at most once a second while the engine
// answers without serving, so it finds the one that serves long before
// the startup deadline, registers it, and logs which instance it took.
func TestTwoEnginesOnOnePort(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	old := startMock(t, e, harness.MockOpts{Extra: []string{"--reuseport"}})
	old.waitLine("serving", harness.StartTimeout)
	old.setHealth(t, "", "NOT_SERVING")
	dir := t.TempDir()
	v := startVigil(t, vigilOpts{engine: e, engineAddr: old.GRPC, discovery: "file", registry: dir, service: "llm",
		extra: []string{"--startup-deadline", "5m"}})
	v.waitLine("waiting for the engine to serve", 30*time.Second) // its connection is with the old one
	next := startMock(t, e, harness.MockOpts{GRPC: old.GRPC, Extra: []string{"--reuseport"}})
	started := time.Now()
	rec, at := waitFile(t, filepath.Join(dir, "llm", v.WorkerID+".json"), true, time.Minute)
	if rec.InstanceID != e.instanceID(next) {
		t.Fatalf("registered instance %q, want the serving one %q (old: %q)", rec.InstanceID, e.instanceID(next), e.instanceID(old))
	}
	t.Logf("registered the serving engine %s after it started", at.Sub(started))
	took := v.waitLine("took the one that serves", 10*time.Second)
	if !strings.Contains(took, e.instanceID(next)) || !strings.Contains(took, e.instanceID(old)) {
		t.Errorf("log line %q, want it to name the instance taken (%s) and the one not serving (%s)", took, e.instanceID(next), e.instanceID(old))
	}
	v.signal(syscall.SIGTERM)
	if code := v.wait(exitBound); code != 0 {
		t.Fatalf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}
