package discovery

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// opTimeout is the least time a backend call gets, whatever the TTL.
const opTimeout = 2 * time.Second

// watchPoll is how often an Announcer reads another owner's registration
// while it watches it: a local agent call or a file read, ten a second for
// at most one TTL, so that a live owner's renewal (every third of its TTL)
// is seen within a tenth of a second.
const watchPoll = 100 * time.Millisecond

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
// Another live vigil's registration of the worker does, and so does
// metadata no registry takes: see Done.
type Announcer struct {
	reg   Registry
	log   hclog.Logger
	owner string // this run's owner token
	// callTimeout is CallTimeout(reg.TTL()).
	callTimeout time.Duration

	kick chan struct{}
	done chan struct{} // closed when err is set
	obs  AnnouncerObserver

	// opMu serialises backend calls.
	opMu sync.Mutex
	// mu guards the fields below.
	mu         sync.Mutex
	want       *Registration // nil: withdrawn
	registered *Registration // what the backend holds, as far as we know
	watching   *watch        // another owner's registration, being watched
	err        error         // why Done closed: a *ConflictError or a *MetaError
	failures   Failures
	// state is what OnState's funcs were last told; renewed is when a
	// call last succeeded.
	state    RegistrationState
	renewed  time.Time
	onState  []func(RegistrationState)
	shortLog map[string]bool // the shortened values logged, by key and value
	// reached: a Register call may have reached the backend (it was made,
	// and neither refused for want of a permission nor left undialled);
	// until then Withdraw has nothing to deregister.
	reached bool
	// cancelSync ends the sync in flight, if any: Withdraw need not wait
	// for a renewal it makes moot.
	cancelSync context.CancelFunc
}

// watch is another owner's registration of the worker as first read, and
// when (on this clock) it was.
type watch struct {
	claim Claim
	since time.Time
}

// NewAnnouncer returns an Announcer over reg, with an owner token of its
// own.
func NewAnnouncer(reg Registry, log hclog.Logger) *Announcer {
	return &Announcer{reg: reg, log: log, owner: rand.Text(), callTimeout: CallTimeout(reg.TTL()),
		kick: make(chan struct{}, 1), done: make(chan struct{}), obs: nopObserver{}}
}

// AnnouncerObserver is told of an Announcer's backend events, for metrics.
// Its methods must not block.
type AnnouncerObserver interface {
	// Failed: a backend call (a registration, renewal or deregistration)
	// failed with err; it is retried.
	Failed(err error)
	// Reregistered: the backend had lost the registration (a renewal
	// found it gone: ErrNotRegistered) and it is registered again.
	Reregistered()
}

type nopObserver struct{}

func (nopObserver) Failed(error)  {}
func (nopObserver) Reregistered() {}

// Observe has o told of the Announcer's backend events. Call it before
// Run.
func (a *Announcer) Observe(o AnnouncerObserver) { a.obs = o }

// RegistrationState is whether the registry holds the worker, as the
// Announcer's last call found it.
type RegistrationState int

const (
	// Unregistered: the registry does not hold the worker: not yet
	// registered, withdrawn, lost by the registry, or unrenewed for one
	// TTL (the backend failing).
	Unregistered RegistrationState = iota
	// Registered: the registry holds the worker, renewed within one TTL.
	Registered
	// Refused: the registry refused the worker for want of a permission
	// (ErrPermissionDenied), which retrying alone will not mend.
	Refused
)

func (s RegistrationState) String() string {
	switch s {
	case Registered:
		return "registered"
	case Refused:
		return "refused"
	}
	return "unregistered"
}

// OnState has f called with each new RegistrationState, in order, under
// the Announcer's lock: f must not block nor call the Announcer. The state
// is Unregistered until then. Call it before Run.
func (a *Announcer) OnState(f func(RegistrationState)) { a.onState = append(a.onState, f) }

// State is the RegistrationState now.
func (a *Announcer) State() RegistrationState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

// setState makes st the state, telling OnState's funcs of a change; a.mu
// is held.
func (a *Announcer) setState(st RegistrationState) {
	if st == a.state {
		return
	}
	a.state = st
	for _, f := range a.onState {
		f(st)
	}
}

// Run renews the registration every third of reg's TTL until ctx ends or
// the Announcer gives up (Done). It does not withdraw on return: call
// Withdraw first.
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
	var poll <-chan time.Time // the next look at another owner's registration
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.done:
			return
		case <-a.kick:
		case <-t.C:
		case <-poll:
		}
		poll = nil
		if a.sync(ctx) {
			poll = time.After(watchPoll)
		}
	}
}

// Done is closed when the Announcer has given up for good: another live
// vigil holds the worker's registration (Err says which; it has then
// written nothing over the other's, and withdraws nothing of it), or a
// metadata value cannot be fitted to the registry (never sent).
func (a *Announcer) Done() <-chan struct{} { return a.done }

// Err is the error that closed Done: a *ConflictError (another vigil
// holds the worker's registration) or a *MetaError (a value the worker is
// routed by does not fit the registry); nil before.
func (a *Announcer) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// giveUp closes Done for err; a.mu is held.
func (a *Announcer) giveUp(err error) {
	if a.err == nil {
		a.err = err
		close(a.done)
	}
}

// Owner is the owner token the Announcer registers with.
func (a *Announcer) Owner() string { return a.owner }

// Announce asks for r to be registered, under the Announcer's owner token,
// its metadata fitted to the registry (Registration.Fit; each value
// shortened is logged once). It returns at once; Run registers. A value
// that cannot be fitted is never sent: the Announcer gives up (Done, Err
// a *MetaError).
func (a *Announcer) Announce(r Registration) {
	r.Owner = a.owner
	fitted, shortened, err := r.Fit()
	a.mu.Lock()
	if err != nil {
		a.giveUp(err)
		a.mu.Unlock()
		return
	}
	a.logShortened(r, fitted, shortened)
	a.want = &fitted
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// logShortened logs each value Fit shortened, once per value; a.mu is
// held.
func (a *Announcer) logShortened(r, fitted Registration, keys []string) {
	full, short := r.Meta(), fitted.Meta()
	for _, k := range keys {
		if seen := k + "\x00" + full[k]; !a.shortLog[seen] {
			if a.shortLog == nil {
				a.shortLog = make(map[string]bool)
			}
			a.shortLog[seen] = true
			a.log.Warn("metadata value over the registry's limit; publishing a prefix and its SHA-256 instead",
				"key", k, "length", len(full[k]), "limit", MaxMetaValue, "published", short[k], "value", full[k])
		}
	}
}

// Registered reports whether the backend holds the registration, as far as
// the Announcer knows.
func (a *Announcer) Registered() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.registered != nil
}

// sync brings the backend in step with want: it registers, renews, or
// takes another look at another owner's registration. It reports whether
// it is watching one, and wants to look again after watchPoll.
func (a *Announcer) sync(ctx context.Context) (watching bool) {
	a.opMu.Lock()
	defer a.opMu.Unlock()
	a.mu.Lock()
	want, have, failed := a.want, a.registered, a.err != nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.cancelSync = cancel
	a.mu.Unlock()
	if want == nil || failed {
		return false
	}
	var (
		err        error
		registered bool
	)
	again := false
	if have != nil && *have == *want {
		registered = true
		err = a.call(ctx, a.reg.Heartbeat, *want)
		if errors.Is(err, ErrNotRegistered) {
			a.log.Warn("registry lost the worker; registering again", "registry", a.reg.String(), "error", err)
			// Until a Register succeeds, every sync registers: a heartbeat
			// first would only be refused again.
			a.mu.Lock()
			a.registered = nil
			a.setState(Unregistered)
			a.mu.Unlock()
			have, again = nil, true
		}
	}
	if have == nil || *have != *want {
		// Calls of their own bound: after a slow refused heartbeat, a bound
		// shared with it would leave the registration too little time.
		if registered, err = a.register(ctx, *want); registered {
			if again {
				a.obs.Reregistered()
				a.log.Info("worker registered again", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID)
			} else {
				a.log.Info("worker registered", "registry", a.reg.String(), "service", want.Service, "worker_id", want.WorkerID, "address", want.Address, "port", want.Port, "caps", want.Caps.String())
			}
		}
	}
	return a.record(ctx, want, registered, err)
}

// record takes in the outcome of sync's calls: a failure is counted and
// logged; a success ends a run of failures and, unless want changed
// meanwhile, makes want the registration the backend holds. It reports
// sync's watching.
func (a *Announcer) record(ctx context.Context, want *Registration, registered bool, err error) (watching bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return false // withdrawn or stopped meanwhile: not a backend failure
	}
	if errors.Is(err, ErrPermissionDenied) {
		// Retrying will not mend it; the operator must fix the token.
		a.obs.Failed(err)
		a.setState(Refused)
		a.failures.FailAt(a.log, hclog.Error, "the registry refused the worker for want of a permission; fix the token (with Consul: a token it knows, with service:write on the service); retrying",
			"registry", a.reg.String(), "service", want.Service, "error", err)
		return a.watching != nil
	}
	if err != nil {
		a.obs.Failed(err)
		if a.registered == nil || time.Since(a.renewed) >= a.reg.TTL() {
			a.setState(Unregistered) // the registration has lapsed, if it was there
		}
		a.failures.Fail(a.log, "registry update failed; retrying", "registry", a.reg.String(), "error", err)
		return a.watching != nil
	}
	a.failures.Recover(a.log, "registry reachable again", "registry", a.reg.String())
	if registered && a.want != nil && *a.want == *want {
		a.registered = want
	}
	if a.registered != nil {
		a.renewed = time.Now()
		a.setState(Registered)
	} else {
		a.setState(Unregistered) // watching another vigil's
	}
	return a.watching != nil && a.err == nil
}

// register registers r unless the backend holds a live registration of
// r's worker by another owner: it reads that first, and reports whether it
// registered. Another owner's registration is watched over calls, for up
// to one TTL by this clock (the longer of this one's and the other's, when
// the backend says): renewed, the Announcer gives up; found stale by the
// backend, or not renewed within the TTL, it is taken over.
func (a *Announcer) register(ctx context.Context, r Registration) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	c, ok, err := a.reg.Claim(cctx, r)
	cancel()
	if err != nil {
		return false, err
	}
	if ok && c.Owner != r.Owner && !a.takeOver(r, c, time.Now()) {
		return false, nil
	}
	err = a.call(ctx, a.reg.Register, r)
	if !notSent(err) {
		a.mu.Lock()
		a.reached = true
		a.mu.Unlock()
	}
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.watching = nil
	a.mu.Unlock()
	return true, nil
}

// notSent reports whether err says that a call's request never reached
// the backend, or was refused whole: a refused permission, or a
// connection that was never made (an agent not listening).
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrPermissionDenied) || errors.As(err, &op) && op.Op == "dial"
}

// takeOver decides, from another owner's registration c read at now,
// whether to replace it; when it is live it gives up.
func (a *Announcer) takeOver(r Registration, c Claim, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.watching
	args := []any{"registry", a.reg.String(), "service", r.Service, "worker_id", r.WorkerID,
		"other_address", c.Addr(), "other_owner", ownerName(c.Owner)}
	switch {
	case c.Stale:
		a.log.Warn("taking over the worker's registration from another vigil, which left it to expire", args...)
		return true
	case w == nil || w.claim.Owner != c.Owner:
		a.watching = &watch{claim: c, since: now}
		a.log.Warn("another vigil holds the worker's registration; watching it for one TTL to tell whether that vigil is alive",
			append(args, "ttl", max(a.reg.TTL(), c.TTL))...)
		return false
	case c != w.claim:
		a.giveUp(&ConflictError{Worker: r, Other: c, Watched: now.Sub(w.since)})
		a.watching = nil
		return false
	case now.Sub(w.since) >= max(a.reg.TTL(), w.claim.TTL):
		a.log.Warn("taking over the worker's registration from another vigil, which did not renew it for one TTL",
			append(args, "ttl", max(a.reg.TTL(), w.claim.TTL))...)
		return true
	}
	return false
}

// call makes one backend call for r under its own bound.
func (a *Announcer) call(ctx context.Context, f func(context.Context, Registration) error, r Registration) error {
	ctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	return f(ctx, r)
}

// Withdraw removes the registration and stops renewing it. It retries a
// failed deregistration until it succeeds or ctx ends, and then returns the
// last error; a deregistration refused for want of a permission
// (ErrPermissionDenied) is not retried. Withdrawing when nothing is
// registered deregisters anyway, in case an earlier Register reached the
// backend but its answer did not; when no Register was made, or every one
// was refused for want of a permission or never reached the backend (a
// connection refused), there is nothing to deregister and it returns at
// once.
//
// Another owner's registration of the worker is never removed: Withdraw
// leaves it, and after the Announcer has given up (Done) it does nothing.
func (a *Announcer) Withdraw(ctx context.Context) error {
	a.mu.Lock()
	r := a.want
	if r == nil {
		r = a.registered
	}
	a.want, a.watching = nil, nil
	var conflict *ConflictError
	failed := errors.As(a.err, &conflict) // nothing of the other's is touched
	if a.cancelSync != nil {
		a.cancelSync() // a renewal in flight is moot now
	}
	a.mu.Unlock()
	if r == nil || failed {
		return nil
	}
	// A sync in flight may yet make a Register call: wait for it (it was
	// cancelled above) before reading whether one was made.
	a.opMu.Lock()
	defer a.opMu.Unlock()
	a.mu.Lock()
	reached := a.reached
	a.mu.Unlock()
	if !reached {
		a.mu.Lock()
		a.setState(Unregistered)
		a.mu.Unlock()
		a.log.Debug("nothing to deregister: no registration reached the registry", "registry", a.reg.String(), "worker_id", r.WorkerID)
		return nil
	}
	return a.deregister(ctx, r)
}

// deregister removes r, retrying a failure until it succeeds or ctx ends;
// see Withdraw.
func (a *Announcer) deregister(ctx context.Context, r *Registration) error {
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// Two calls' bound: a deregistration reads the owner first.
		octx, cancel := context.WithTimeout(ctx, 2*a.callTimeout)
		err := a.reg.Deregister(octx, *r)
		cancel()
		if err == nil || errors.Is(err, ErrNotRegistered) {
			a.mu.Lock()
			a.registered = nil
			a.setState(Unregistered)
			a.mu.Unlock()
			if err != nil {
				a.log.Info("the worker's registration is another vigil's now; left in place", "registry", a.reg.String(), "service", r.Service, "worker_id", r.WorkerID, "reason", err)
			} else {
				a.log.Info("worker deregistered", "registry", a.reg.String(), "service", r.Service, "worker_id", r.WorkerID)
			}
			return nil
		}
		a.obs.Failed(err)
		if errors.Is(err, ErrPermissionDenied) {
			return fmt.Errorf("deregistering worker %s: %w", r.WorkerID, err)
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
