package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// Finish records the stall timeout and waits as Drain does.
func (e *fakeEndpoint) Finish(ctx context.Context, stall, cut time.Duration) error {
	e.mu.Lock()
	e.stall = stall
	e.mu.Unlock()
	return e.Drain(ctx, cut)
}

func (e *fakeEndpoint) finishStall() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stall
}

// An engine that drains on purpose is withdrawn at once, its requests in
// flight run on past the grace period until they finish, and vigil exits 1
// after the last.
func TestLifecycleEngineDrains(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})}
	grace := 50 * time.Millisecond
	h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) {
		c.GracePeriod, c.DrainTimeout, c.StallTimeout = grace, time.Hour, 7*time.Second
	})
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Draining)
	h.registered(false)
	if ep.Serving() {
		t.Error("endpoint admitting while the engine drains")
	}
	select {
	case err := <-h.out:
		t.Fatalf("Run returned %v within 4 grace periods, with a request still in flight; want it to wait for the request", err)
	case <-time.After(4 * grace):
	}
	h.send(sdk.Serving) // late: registers nothing
	close(ep.release)
	h.ended(outcome.ErrEngineLost)
	h.registered(false)
	if got := ep.finishStall(); got != 7*time.Second {
		t.Errorf("Finish's stall timeout = %s, want --stall-timeout's 7s", got)
	}
}

// The drain timeout bounds the engine's drain.
func TestLifecycleEngineDrainTimeout(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})} // never released
	h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) { c.GracePeriod, c.DrainTimeout = time.Hour, 100*time.Millisecond })
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Draining)
	h.ended(outcome.ErrEngineLost)
}

// A real loss or a stop during the engine's drain is handled as today:
// the requests left get the grace period, then are cut.
func TestLifecycleEngineDrainThenLossOrStop(t *testing.T) {
	t.Parallel()
	for name, then := range map[string]func(*harness){
		"loss": func(h *harness) { h.send(sdk.Lost) },
		"stop": func(h *harness) { h.signal() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cut := errors.New("cut")
			ep := &fakeEndpoint{release: make(chan struct{}), cutErr: cut} // never released
			h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) { c.GracePeriod, c.DrainTimeout = 100*time.Millisecond, time.Hour })
			h.send(sdk.Serving)
			h.registered(true)
			h.send(sdk.Draining)
			h.registered(false)
			then(h)
			h.ended(outcome.ErrEngineLost)
		})
	}
}

// A draining engine that was not ready exits 1 too, without registering.
func TestLifecycleEngineDrainsNotReady(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{}
	h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) { c.DrainTimeout = time.Hour })
	h.send(sdk.NotReady)
	h.send(sdk.Draining)
	h.ended(outcome.ErrEngineLost)
	h.registered(false)
}

// Without a drain timeout (--drain-timeout 0) a drain is a loss: the
// grace period bounds the requests in flight.
func TestLifecycleEngineDrainOff(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})} // never released
	h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) { c.GracePeriod, c.StallTimeout = 100*time.Millisecond, time.Hour })
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Draining)
	h.ended(outcome.ErrEngineLost)
	if got := ep.finishStall(); got != 0 {
		t.Errorf("Finish called (stall %s) with the drain off, want the loss's Drain", got)
	}
}
