package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// slow is a Registry whose calls each take latency, or fail as a timed-out
// call does when ctx ends first; a call that ctx's deadline leaves too
// little time fails at once, as it would when its time ran out. Its
// successful calls are recorded by rec, and timed-out ones as "<op>
// timed out".
type slow struct {
	rec *recorder
	// virtual: calls take no real time, only their deadline is checked
	// against latency.
	virtual bool

	mu       sync.Mutex
	latency  time.Duration
	inFlight int
	overlap  bool
	forgot   bool // heartbeats answer ErrNotRegistered until a register
}

func (s *slow) take(ctx context.Context, op string) error {
	s.mu.Lock()
	s.inFlight++
	s.overlap = s.overlap || s.inFlight > 1
	latency := s.latency
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if d, ok := ctx.Deadline(); ok && time.Until(d) < latency {
		if !s.virtual {
			<-ctx.Done()
		}
		s.rec.op(op + " timed out")
		return context.DeadlineExceeded
	}
	if !s.virtual {
		select {
		case <-time.After(latency):
		case <-ctx.Done():
			s.rec.op(op + " cancelled")
			return ctx.Err()
		}
	}
	s.mu.Lock()
	forgot := s.forgot && op == "heartbeat"
	if op == "register" {
		s.forgot = false
	}
	s.mu.Unlock()
	err := s.rec.op(op)
	if forgot {
		return fmt.Errorf("%w: check gone", discovery.ErrNotRegistered)
	}
	return err
}

func (s *slow) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot = true
}

func (s *slow) Register(ctx context.Context, _ discovery.Registration) error {
	return s.take(ctx, "register")
}
func (s *slow) Heartbeat(ctx context.Context, _ discovery.Registration) error {
	return s.take(ctx, "heartbeat")
}
func (s *slow) Deregister(ctx context.Context, _ discovery.Registration) error {
	return s.take(ctx, "deregister")
}
func (s *slow) Claim(ctx context.Context, _ discovery.Registration) (discovery.Claim, bool, error) {
	return discovery.Claim{}, false, s.take(ctx, "claim")
}
func (s *slow) TTL() time.Duration { return s.rec.ttl }
func (s *slow) String() string     { return "slow recorder" }

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	for ttl, want := range map[time.Duration]time.Duration{
		time.Second:      2 * time.Second, // never below 2s
		3 * time.Second:  2 * time.Second,
		5 * time.Second:  5*time.Second - 5*time.Second/3,
		30 * time.Second: 20 * time.Second,
	} {
		if got := discovery.CallTimeout(ttl); got != want {
			t.Errorf("CallTimeout(%s) = %s, want %s", ttl, got, want)
		}
	}
}

// TestSlowBackendWithinTTL: a backend that takes longer than 2s to answer,
// but well within the TTL, registers and renews the worker: calls get two
// thirds of the TTL, not a fixed bound below the backend's latency.
func TestSlowBackendWithinTTL(t *testing.T) {
	t.Parallel()
	reg := &slow{rec: newRecorder(9 * time.Second), latency: 4 * time.Second, virtual: true}
	a := start(t, reg)
	a.Announce(worker)
	for _, op := range []string{"claim", "register", "heartbeat"} {
		if got := <-reg.rec.called; got != op {
			t.Fatalf("call = %q, want %q: a 4s call under a 9s TTL succeeds", got, op)
		}
	}
	if !a.Registered() {
		t.Error("Registered() = false after a register and a heartbeat succeeded")
	}
}

// TestRegistersAgainUnderLatency: when the backend has lost the worker and
// every call takes 1.2s under a 3s TTL, the heartbeat refused and the
// register after it get a bound each, and the worker is registered again
// (with one 2s bound for both, the register always timed out).
func TestRegistersAgainUnderLatency(t *testing.T) {
	t.Parallel()
	reg := &slow{rec: newRecorder(3 * time.Second), latency: 1200 * time.Millisecond}
	a := start(t, reg)
	a.Announce(worker)
	reg.rec.await(t, "register")
	reg.forget()
	reg.rec.await(t, "heartbeat") // refused: lost
	timeout := time.After(5 * time.Second)
	for _, op := range []string{"claim", "register"} {
		select {
		case got := <-reg.rec.called:
			if got != op {
				t.Fatalf("call after the refused heartbeat = %q, want %s", got, op)
			}
		case <-timeout:
			t.Fatal("not registered within 5s of the refused heartbeat")
		}
	}
}

// TestRenewalsKeepSchedule: with calls slower than the renewal period,
// renewals go back to back, one at a time: each lands max(period, latency)
// after the last, not a period after the last returned.
func TestRenewalsKeepSchedule(t *testing.T) {
	t.Parallel()
	const (
		ttl     = 1500 * time.Millisecond // period 500ms
		latency = 600 * time.Millisecond
		slack   = 350 * time.Millisecond // a period after the return would be 500ms late
	)
	reg := &slow{rec: newRecorder(ttl), latency: latency}
	a := start(t, reg)
	a.Announce(worker)
	reg.rec.await(t, "register")
	last := time.Now()
	for i := range 5 {
		reg.rec.await(t, "heartbeat")
		if gap := time.Since(last); gap > latency+slack {
			t.Errorf("renewal %d landed %s after the last, want within %s", i, gap, latency+slack)
		}
		last = time.Now()
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.overlap {
		t.Error("two backend calls overlapped")
	}
}

// TestWithdrawCancelsRenewal: a renewal hung on an unresponsive backend does
// not hold up the withdrawal; Withdraw cancels it and deregisters at once.
func TestWithdrawCancelsRenewal(t *testing.T) {
	t.Parallel()
	reg := &slow{rec: newRecorder(30 * time.Second), latency: time.Hour}
	a := discovery.NewAnnouncer(reg, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	a.Announce(worker)
	// The register hangs: the backend takes an hour, its bound is 20s.
	waitInFlight(t, reg)
	reg.mu.Lock()
	reg.latency = 0 // deregistrations are answered at once
	reg.mu.Unlock()
	start := time.Now()
	if err := a.Withdraw(context.Background()); err != nil {
		t.Fatalf("Withdraw = %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Withdraw took %s behind a hung call, want it cancelled at once", d)
	}
}

// waitInFlight polls until reg has a call in flight: the hung call gives
// no other sign.
func waitInFlight(t *testing.T, reg *slow) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		reg.mu.Lock()
		n := reg.inFlight
		reg.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no backend call in flight within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPermissionDenied: a registration refused for want of a permission is
// logged at ERROR with the backend's words and retried; withdrawing the
// worker then deregisters nothing, since no Register reached the backend,
// and returns at once instead of retrying until its deadline.
func TestPermissionDenied(t *testing.T) {
	t.Parallel()
	rec := newRecorder(30 * time.Millisecond)
	denied := fmt.Errorf("registering llm-w1 in consul: %w: Unexpected response code: 403 (Permission denied: token with AccessorID 'x' lacks permission 'service:write' on \"llm\")", discovery.ErrPermissionDenied)
	rec.setFail("register", denied)
	var buf syncBuffer
	a := discovery.NewAnnouncer(rec, hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	a.Announce(worker)
	rec.await(t, "register")
	rec.await(t, "register") // retried
	if got := buf.String(); !strings.Contains(got, "[ERROR]") || !strings.Contains(got, "lacks permission 'service:write'") {
		t.Errorf("log = %q, want an ERROR naming the missing permission", got)
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	began := time.Now()
	if err := a.Withdraw(wctx); err != nil {
		t.Fatalf("Withdraw = %v, want nil: nothing was registered", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Withdraw took %v, want well under 1s", took)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, c := range rec.calls {
		if c == "deregister" {
			t.Errorf("calls = %v, want no deregister: no Register reached the backend", rec.calls)
			break
		}
	}
}

// TestWithdrawDeniedNotRetried: a deregistration refused for want of a
// permission returns at once with its error, instead of retrying until
// the caller's deadline.
func TestWithdrawDeniedNotRetried(t *testing.T) {
	t.Parallel()
	rec := newRecorder(time.Hour)
	a := start(t, rec)
	a.Announce(worker)
	rec.await(t, "register")
	rec.setFail("deregister", fmt.Errorf("%w: ACL not found", discovery.ErrPermissionDenied))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	err := a.Withdraw(ctx)
	if !errors.Is(err, discovery.ErrPermissionDenied) {
		t.Fatalf("Withdraw = %v, want ErrPermissionDenied", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Withdraw took %v, want well under 1s", took)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestWithdrawNeverReached: when every Register failed to connect (an
// agent not listening), nothing reached the backend, and Withdraw returns
// at once without deregistering, instead of retrying the unreachable
// backend until its deadline.
func TestWithdrawNeverReached(t *testing.T) {
	t.Parallel()
	rec := newRecorder(30 * time.Millisecond)
	refused := fmt.Errorf("registering llm-w1 in consul: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	rec.setFail("register", refused)
	rec.setFail("deregister", refused)
	a := start(t, rec)
	a.Announce(worker)
	rec.await(t, "register")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := a.Withdraw(ctx); err != nil {
		t.Fatalf("Withdraw = %v, want nil: nothing reached the backend", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Withdraw took %v, want well under 1s", took)
	}
}
