package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthOf checks the worker endpoint's health services.
type healthOf struct {
	t *testing.T
	h healthpb.HealthClient
}

func dialHealth(t *testing.T, listen string) healthOf {
	t.Helper()
	conn, err := grpc.NewClient(listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthOf{t, healthpb.NewHealthClient(conn)}
}

func (h healthOf) check(service string) healthpb.HealthCheckResponse_ServingStatus {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := h.h.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		h.t.Fatalf("health Check %q: %v", service, err)
	}
	return r.GetStatus()
}

// watch relays service's health changes; the channel closes when the
// watch ends.
func (h healthOf) watch(service string) <-chan healthpb.HealthCheckResponse_ServingStatus {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	w, err := h.h.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		h.t.Fatal(err)
	}
	changes := make(chan healthpb.HealthCheckResponse_ServingStatus, 16)
	go func() {
		defer close(changes)
		for {
			r, err := w.Recv()
			if err != nil {
				return
			}
			changes <- r.GetStatus()
		}
	}()
	return changes
}

// awaitInstance waits until the file record at path carries instanceID.
func awaitInstance(t *testing.T, path, instanceID string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rec, _ := waitFile(t, path, true, time.Until(deadline))
		if rec.InstanceID == instanceID {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s holds instance id %q, want %q within %s", path, rec.InstanceID, instanceID, timeout)
		}
		time.Sleep(5 * time.Millisecond) // a file has no event to await
	}
}

// TestOnLossWait: with --on-loss=wait, the engine killed, vigil withdraws
// the worker and stays up, its liveness SERVING (a Kubernetes liveness
// probe does not restart it) and readiness NOT_SERVING; a new engine
// started on the same address is registered by the same vigil with its
// new instance id, through a relaunched adapter; SIGTERM then exits 0.
func TestOnLossWait(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	metricsAddr := addr(freePort(t))
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm",
		extra: []string{"--on-loss", "wait", "--metrics-listen", metricsAddr}})
	path := filepath.Join(dir, "llm", v.WorkerID+".json")
	awaitInstance(t, path, e.instanceID(m), 30*time.Second)
	pid, adapters := v.pid(), children(v.pid())
	health := dialHealth(t, v.Listen)
	liveness := health.watch("vigil.liveness")
	if st := <-liveness; st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness while serving = %s, want SERVING", st)
	}

	m.signal(syscall.SIGKILL)
	m.wait(exitBound)
	waitFile(t, path, false, exitBound)
	l := v.waitLine("--on-loss=wait: waiting for the engine again", exitBound)
	if !strings.Contains(l, "startup_deadline=") {
		t.Errorf("the wait's log line %q does not give the startup deadline", l)
	}
	v.waitLine("waiting for engine", exitBound)
	if v.exited() {
		t.Fatalf("vigil exited (%d) after the engine loss under --on-loss=wait", v.exitCode())
	}
	if st := health.check("vigil.liveness"); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness while waiting for the engine again = %s, want SERVING", st)
	}
	if st := health.check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf(`readiness ("") while waiting for the engine again = %s, want NOT_SERVING`, st)
	}
	if len(adapters) != 1 || alive(adapters[0]) {
		t.Errorf("the first adapter %v is still running: it is not restarted", adapters)
	}

	next := startMock(t, e, harness.MockOpts{GRPC: m.GRPC})
	awaitInstance(t, path, e.instanceID(next), 30*time.Second)
	if v.pid() != pid || v.exited() {
		t.Errorf("the new engine registered by pid %d (exited %v), want vigil's %d", v.pid(), v.exited(), pid)
	}
	awaitMetric(t, metricsAddr, `vigil_engine_recoveries_total{cause="lost"}`, 1, exitBound)
	select {
	case st := <-liveness:
		t.Errorf("liveness changed to %s across the loss and the wait", st)
	default:
	}

	v.term(t)
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("vigil exit code after SIGTERM = %d, want 0", code)
	}
	waitFile(t, path, false, 0)
}

// TestOnLossWaitStartupDeadline: the wait after a loss is bounded by
// --startup-deadline, whose passing exits as a startup deadline does (1).
func TestOnLossWaitStartupDeadline(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm",
		extra: []string{"--on-loss", "wait", "--startup-deadline", "2s"}})
	path := filepath.Join(dir, "llm", v.WorkerID+".json")
	waitFile(t, path, true, 30*time.Second)
	m.signal(syscall.SIGKILL)
	m.wait(exitBound)
	v.waitLine("--on-loss=wait: waiting for the engine again", exitBound)
	if code := v.wait(exitBound + 2*time.Second); code != 1 {
		t.Fatalf("vigil exit code = %d, want 1 (a startup deadline)", code)
	}
	v.waitLine("engine did not serve within the startup deadline", 0)
}

// TestOnLossWaitAdapterFrozen: with --on-loss=wait, the adapter process
// frozen (SIGSTOP) while the engine serves is SIGKILLed within the ping
// bound and a new adapter launched by the same vigil, which registers the
// engine (still the same one) again; SIGTERM then exits 0.
func TestOnLossWaitAdapterFrozen(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: "llm", extra: []string{
		"--on-loss", "wait", "--health-interval", "200ms", "--health-timeout", "500ms", "--health-failures", "2"}})
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
	if err := syscall.Kill(adapters[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFile(t, path, false, exitBound)
	v.waitLine("killing the engine adapter (SIGKILL)", exitBound)
	v.waitLine("--on-loss=wait: waiting for the engine again", exitBound)
	awaitInstance(t, path, e.instanceID(m), 30*time.Second)
	if v.exited() {
		t.Fatalf("vigil exited (%d) after its adapter froze, under --on-loss=wait", v.exitCode())
	}
	if alive(adapters[0]) {
		t.Errorf("the frozen adapter %d is still running", adapters[0])
	}
	if now := children(v.pid()); len(now) != 1 || now[0] == adapters[0] {
		t.Errorf("vigil's children are %v, want one new adapter (the frozen one was %d)", now, adapters[0])
	}
	v.term(t)
	if code := v.wait(exitBound); code != 0 {
		t.Errorf("vigil exit code after SIGTERM = %d, want 0", code)
	}
}
