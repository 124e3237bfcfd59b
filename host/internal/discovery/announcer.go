package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// opTimeout is the least time a backend call gets, whatever the TTL.
const opTimeout = 2 * time.Second

// CallTimeout bounds one backend call (register, renew, deregister) under
// a TTL of ttl: two thirds of the TTL, and at least opTimeout (2s).
// Renewals go out every third of the TTL, so a call that returns within
// two thirds lands before the registration it renews lapses; a slower one
// cannot keep it passing anyway, and waiting longer would only delay the
// next try. Slow backend calls that still fit (an agent answering in 3s
// under a 30s TTL) succeed instead of all timing out at a fixed bound. A
// withdrawal's attempts are bounded by its caller's deadline as well.
func CallTimeout(ttl time.Duration) time.Duration { return max(opTimeout, ttl-ttl/3) }

// Announcer keeps one worker's registration in step with what the host
// wants. Backend failures never end it: they are logged and retried.
type Announcer struct {
	reg Registry
	log hclog.Logger
	// callTimeout is CallTimeout(reg.TTL()).
	callTimeout time.Duration

	kick chan struct{}

	// opMu serialises backend calls.
	opMu sync.Mutex
	// mu guards the fields below.
	mu         sync.Mutex
	want       *Registration // nil: withdrawn
	registered *Registration // what the backend holds, as far as we know
	failures   Failures
	// cancelSync ends the sync in flight, if any: Withdraw need not wait
	// for a renewal it makes moot.
	cancelSync context.CancelFunc
}

// NewAnnouncer returns an Announcer over reg.
func NewAnnouncer(reg Registry, log hclog.Logger) *Announcer {
	return &Announcer{reg: reg, log: log, callTimeout: CallTimeout(reg.TTL()), kick: make(chan struct{}, 1)}
}

// Run renews the registration every third of reg's TTL until ctx ends. It
// does not withdraw on return: call Withdraw first.
//
// The renewals keep a fixed schedule, from Run's start, whatever the calls
// take: one call at a time, each bounded by CallTimeout. A call that
// outlasts the period is followed at once by the next (the ticker keeps one
// tick and drops the rest), so calls never overlap or queue up, and with a
// backend latency L below two thirds of the TTL a renewal lands at least
// every max(TTL/3, L): inside the TTL. (Scheduling each renewal a third of
// the TTL after the last returned would let the gap grow to TTL/3 + L.)
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.cancelSync = cancel
	a.mu.Unlock()
	if want == nil {
		return
	}
	var err error
	again := false
	if have != nil && *have == *want {
		err = a.call(ctx, a.reg.Heartbeat, *want)
		if errors.Is(err, ErrNotRegistered) {
			a.log.Warn("registry lost the worker; registering again", "registry", a.reg.String(), "error", err)
			// Until a Register succeeds, every sync registers: a heartbeat
			// first would only be refused again.
			a.mu.Lock()
			a.registered = nil
			a.mu.Unlock()
			have, again = nil, true
		}
	}
	if have == nil || *have != *want {
		// Its own call bound: after a slow refused heartbeat, a bound
		// shared with it would leave the registration too little time.
		if err = a.call(ctx, a.reg.Register, *want); err == nil {
			if again {
				a.log.Info("worker registered again", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID)
			} else {
				a.log.Info("worker registered", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID, "address", want.Address, "port", want.Port)
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return // withdrawn or stopped meanwhile: not a backend failure
	}
	if err != nil {
		a.failures.Fail(a.log, "registry update failed; retrying", "registry", a.reg.String(), "error", err)
		return
	}
	a.failures.Recover(a.log, "registry reachable again", "registry", a.reg.String())
	if a.want != nil && *a.want == *want {
		a.registered = want
	}
}

// call makes one backend call for r under its own bound.
func (a *Announcer) call(ctx context.Context, f func(context.Context, Registration) error, r Registration) error {
	ctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	return f(ctx, r)
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
	if a.cancelSync != nil {
		a.cancelSync() // a renewal in flight is moot now
	}
	a.mu.Unlock()
	if r == nil {
		return nil
	}
	a.opMu.Lock()
	defer a.opMu.Unlock()
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, a.callTimeout)
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
