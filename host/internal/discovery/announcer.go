package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// opTimeout bounds one backend call, so a hung backend cannot hold up a
// withdrawal for long.
const opTimeout = 2 * time.Second

// Announcer keeps one worker's registration in step with what the host
// wants. Backend failures never end it: they are logged and retried.
type Announcer struct {
	reg Registry
	log hclog.Logger

	kick chan struct{}

	// opMu serialises backend calls.
	opMu sync.Mutex
	// mu guards the fields below.
	mu         sync.Mutex
	want       *Registration // nil: withdrawn
	registered *Registration // what the backend holds, as far as we know
	failures   Failures
}

// NewAnnouncer returns an Announcer over reg.
func NewAnnouncer(reg Registry, log hclog.Logger) *Announcer {
	return &Announcer{reg: reg, log: log, kick: make(chan struct{}, 1)}
}

// Run renews the registration every third of reg's TTL until ctx ends. It
// does not withdraw on return: call Withdraw first.
func (a *Announcer) Run(ctx context.Context) {
	// The renewal period comes from the TTL the registry publishes, so the
	// two cannot disagree.
	t := time.NewTicker(a.reg.TTL() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-t.C:
		}
		a.sync(ctx)
	}
}

// Announce asks for r to be registered. It returns at once; Run registers.
func (a *Announcer) Announce(r Registration) {
	a.mu.Lock()
	a.want = &r
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Registered reports whether the backend holds the registration, as far as
// the Announcer knows.
func (a *Announcer) Registered() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.registered != nil
}

func (a *Announcer) sync(ctx context.Context) {
	a.opMu.Lock()
	defer a.opMu.Unlock()
	a.mu.Lock()
	want, have := a.want, a.registered
	a.mu.Unlock()
	if want == nil {
		return
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var err error
	switch {
	case have == nil || *have != *want:
		if err = a.reg.Register(octx, *want); err == nil {
			a.log.Info("worker registered", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID, "address", want.Address, "port", want.Port)
		}
	default:
		err = a.reg.Heartbeat(octx, *want)
		if errors.Is(err, ErrNotRegistered) {
			a.log.Warn("registry lost the worker; registering again", "registry", a.reg.String(), "error", err)
			if err = a.reg.Register(octx, *want); err == nil {
				a.log.Info("worker registered again", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID)
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failures.Fail(a.log, "registry update failed; retrying", "registry", a.reg.String(), "error", err)
		return
	}
	a.failures.Recover(a.log, "registry reachable again", "registry", a.reg.String())
	if a.want != nil && *a.want == *want {
		a.registered = want
	}
}

// Withdraw removes the registration and stops renewing it. It retries a
// failed deregistration until it succeeds or ctx ends, and then returns the
// last error. Withdrawing when nothing is registered deregisters anyway, in
// case an earlier Register reached the backend but its answer did not.
func (a *Announcer) Withdraw(ctx context.Context) error {
	a.mu.Lock()
	r := a.want
	if r == nil {
		r = a.registered
	}
	a.want = nil
	a.mu.Unlock()
	if r == nil {
		return nil
	}
	a.opMu.Lock()
	defer a.opMu.Unlock()
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := a.reg.Deregister(octx, *r)
		cancel()
		if err == nil {
			a.mu.Lock()
			a.registered = nil
			a.mu.Unlock()
			a.log.Info("worker deregistered", "registry", a.reg.String(), "service", r.Service, "worker_id", r.WorkerID)
			return nil
		}
		a.log.Warn("deregistration failed; retrying", "registry", a.reg.String(), "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("deregistering worker %s: %w", r.WorkerID, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}
