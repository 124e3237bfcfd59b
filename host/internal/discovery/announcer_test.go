package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// recorder is a Registry that records calls and fails on demand; the
// backends themselves are tested against real Consul and a real directory.
type recorder struct {
	ttl    time.Duration
	mu     sync.Mutex
	calls  []string
	fail   map[string]error // by operation
	called chan string
}

func newRecorder(ttl time.Duration) *recorder {
	return &recorder{ttl: ttl, fail: map[string]error{}, called: make(chan string, 100)}
}

func (r *recorder) op(name string) error {
	r.mu.Lock()
	err := r.fail[name]
	r.calls = append(r.calls, name)
	r.mu.Unlock()
	r.called <- name
	return err
}

func (r *recorder) setFail(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[op] = err
}

func (r *recorder) Register(context.Context, discovery.Registration) error  { return r.op("register") }
func (r *recorder) Heartbeat(context.Context, discovery.Registration) error { return r.op("heartbeat") }
func (r *recorder) Deregister(context.Context, discovery.Registration) error {
	return r.op("deregister")
}
func (r *recorder) Claim(context.Context, discovery.Registration) (discovery.Claim, bool, error) {
	return discovery.Claim{}, false, r.op("claim")
}
func (r *recorder) TTL() time.Duration { return r.ttl }
func (r *recorder) String() string     { return "recorder" }

// await waits for the next call named op, skipping others.
func (r *recorder) await(t *testing.T, op string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-r.called:
			if got == op {
				return
			}
		case <-timeout:
			t.Fatalf("no %s call within 10s", op)
		}
	}
}

func start(t *testing.T, reg discovery.Registry) *discovery.Announcer {
	a := discovery.NewAnnouncer(reg, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

var worker = discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 1}

// The story of one worker: announced, kept alive, lost by the backend and
// registered again, withdrawn with a failing first deregistration.
func TestAnnouncerStory(t *testing.T) {
	t.Parallel()
	rec := newRecorder(30 * time.Millisecond)
	a := start(t, rec)

	a.Announce(worker)
	rec.await(t, "register")
	rec.await(t, "heartbeat")

	// The backend forgot the worker (a restarted Consul agent): register again.
	rec.setFail("heartbeat", fmt.Errorf("%w: check gone", discovery.ErrNotRegistered))
	rec.await(t, "heartbeat")
	rec.await(t, "register")
	rec.setFail("heartbeat", nil)

	// A backend outage is retried, never fatal.
	rec.setFail("heartbeat", errors.New("connection refused"))
	rec.await(t, "heartbeat")
	rec.await(t, "heartbeat")
	rec.setFail("heartbeat", nil)

	// Withdraw retries a failed deregistration.
	rec.setFail("deregister", errors.New("agent busy"))
	done := make(chan error, 1)
	go func() { done <- a.Withdraw(context.Background()) }()
	rec.await(t, "deregister")
	rec.setFail("deregister", nil)
	if err := <-done; err != nil {
		t.Fatalf("Withdraw = %v, want nil", err)
	}
	if a.Registered() {
		t.Error("Registered() = true after Withdraw")
	}
}

// TestWithdrawGivesUpAtDeadline: Withdraw returns the last error when ctx
// ends before a deregistration succeeds.
func TestWithdrawGivesUpAtDeadline(t *testing.T) {
	t.Parallel()
	rec := newRecorder(time.Hour)
	a := start(t, rec)
	a.Announce(worker)
	rec.await(t, "register")
	rec.setFail("deregister", errors.New("unreachable"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := a.Withdraw(ctx)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("Withdraw = %v, want the deregistration error", err)
	}
}

// TestWithdrawNothing: withdrawing a worker never announced calls nothing.
func TestWithdrawNothing(t *testing.T) {
	t.Parallel()
	rec := newRecorder(time.Hour)
	a := start(t, rec)
	if err := a.Withdraw(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) != 0 {
		t.Errorf("calls = %v, want none", rec.calls)
	}
}
