package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// store is a backend in memory that several vigils' Registries share: it
// holds at most one registration of the worker, and keeps owners apart as
// the real backends do.
type store struct {
	ttl time.Duration

	mu       sync.Mutex
	held     *discovery.Registration
	renewals int
	stale    bool
	heldTTL  time.Duration // the held registration's TTL as its writer published it
	writes   []string      // owner of each Register, in order
}

func newStore(ttl time.Duration) *store { return &store{ttl: ttl} }

func (s *store) Register(_ context.Context, r discovery.Registration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.renewals, s.stale = &r, 0, false
	s.writes = append(s.writes, r.Owner)
	return nil
}

func (s *store) Heartbeat(_ context.Context, r discovery.Registration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil || s.held.Owner != r.Owner {
		return fmt.Errorf("%w: not ours", discovery.ErrNotRegistered)
	}
	s.renewals++
	s.stale = false
	return nil
}

func (s *store) Deregister(_ context.Context, r discovery.Registration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil && s.held.Owner != r.Owner {
		return fmt.Errorf("%w: another's", discovery.ErrNotRegistered)
	}
	s.held = nil
	return nil
}

func (s *store) Claim(context.Context, discovery.Registration) (discovery.Claim, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return discovery.Claim{}, false, nil
	}
	return discovery.Claim{Owner: s.held.Owner, Address: s.held.Address, Port: s.held.Port,
		Renewal: strconv.Itoa(s.renewals), Stale: s.stale, TTL: s.heldTTL}, true, nil
}

func (s *store) TTL() time.Duration { return s.ttl }
func (s *store) String() string     { return "store" }

// holds is the registration held now, or nil.
func (s *store) holds() *discovery.Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return nil
	}
	r := *s.held
	return &r
}

// plant puts another vigil's registration in place, as it would have
// written it, and returns its owner.
func (s *store) plant(r discovery.Registration, owner string, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Owner = owner
	s.held, s.renewals, s.stale = &r, 0, stale
}

// renew renews the held registration as its owner would.
func (s *store) renew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewals++
}

// waitHeld waits until the store holds a registration of owner, and
// returns when it saw it.
func (s *store) waitHeld(t *testing.T, owner string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if h := s.holds(); h != nil && h.Owner == owner {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("store holds %+v, want owner %s's registration within %s", s.holds(), owner, within)
		}
		time.Sleep(time.Millisecond)
	}
}

var (
	first  = discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 8470}
	second = discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.2", Port: 8470}
)

// TestAnnouncerLiveOwnerConflict: two vigils given one worker id. The
// later one finds the first's registration, sees it renewed, and gives up
// with a ConflictError naming the first; it writes nothing over it and
// withdraws nothing of it, and the first keeps renewing.
func TestAnnouncerLiveOwnerConflict(t *testing.T) {
	t.Parallel()
	ttl := 600 * time.Millisecond
	st := newStore(ttl)
	a := start(t, st)
	a.Announce(first)
	st.waitHeld(t, a.Owner(), 10*time.Second)

	b := start(t, st)
	announced := time.Now()
	b.Announce(second)
	select {
	case <-b.Done():
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("the later announcer did not give up within the TTL (%s) + 2s", ttl)
	}
	t.Logf("gave up %s after Announce", time.Since(announced))
	var ce *discovery.ConflictError
	if err := b.Err(); !errors.As(err, &ce) || ce.Other.Addr() != "127.0.0.1:8470" || ce.Other.Owner != a.Owner() {
		t.Fatalf("Err = %v, want a ConflictError naming 127.0.0.1:8470 and the first's owner", err)
	}
	if err := b.Withdraw(context.Background()); err != nil {
		t.Fatalf("Withdraw after giving up = %v, want nil", err)
	}
	if h := st.holds(); h == nil || h.Owner != a.Owner() || h.Address != "127.0.0.1" {
		t.Fatalf("store holds %+v, want the first's registration", h)
	}
	for _, w := range st.writes {
		if w != a.Owner() {
			t.Errorf("a Register by %s, want only the first's", w)
		}
	}
	if a.Registered() != true || b.Registered() {
		t.Errorf("Registered: first %v, later %v; want true, false", a.Registered(), b.Registered())
	}
}

// TestAnnouncerTakesOverUnrenewed: a registration of another owner that
// is not renewed (a vigil SIGKILLed and restarted at once, the backend not
// yet finding it stale) is taken over one TTL after it was first seen, by
// the announcer's own clock; one the backend finds stale at once.
func TestAnnouncerTakesOverUnrenewed(t *testing.T) {
	t.Parallel()
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale %v", stale), func(t *testing.T) {
			t.Parallel()
			ttl := 500 * time.Millisecond
			st := newStore(ttl)
			st.plant(first, "killed", stale)
			b := start(t, st)
			announced := time.Now()
			b.Announce(first)
			d := st.waitHeld(t, b.Owner(), ttl+2*time.Second).Sub(announced)
			switch {
			case stale && d >= ttl:
				t.Errorf("took over a stale registration after %s, want at once", d)
			case !stale && d < ttl:
				t.Errorf("took over after %s, before one TTL (%s) without renewal", d, ttl)
			}
			select {
			case <-b.Done():
				t.Fatalf("gave up: %v", b.Err())
			default:
			}
		})
	}
}

// TestAnnouncerWatchesTheLongerTTL: another owner's registration with a
// longer TTL than this vigil's (renewed every third of it) is watched for
// its TTL, not this one's, before it is taken over.
func TestAnnouncerWatchesTheLongerTTL(t *testing.T) {
	t.Parallel()
	ttl, theirs := 200*time.Millisecond, time.Second
	st := newStore(ttl)
	st.plant(first, "killed", false)
	st.mu.Lock()
	st.heldTTL = theirs
	st.mu.Unlock()
	b := start(t, st)
	announced := time.Now()
	b.Announce(first)
	if d := st.waitHeld(t, b.Owner(), theirs+2*time.Second).Sub(announced); d < theirs {
		t.Errorf("took over after %s, before the other's TTL (%s)", d, theirs)
	}
}

// TestAnnouncerHeartbeatFindsAnother: the registration was overwritten by
// another owner (two vigils registered at one instant); the next renewal
// finds it, stops renewing, and gives up when the other keeps renewing,
// leaving the other's registration in place.
func TestAnnouncerHeartbeatFindsAnother(t *testing.T) {
	t.Parallel()
	ttl := 600 * time.Millisecond
	st := newStore(ttl)
	a := start(t, st)
	a.Announce(first)
	st.waitHeld(t, a.Owner(), 10*time.Second)
	st.plant(second, "other", false)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the other vigil, alive
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				st.renew()
			}
		}
	}()
	select {
	case <-a.Done():
	case <-time.After(2*ttl + 2*time.Second):
		t.Fatal("the overwritten announcer did not give up")
	}
	if err := a.Withdraw(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := st.holds(); h == nil || h.Owner != "other" {
		t.Errorf("store holds %+v, want the other's registration", h)
	}
}

// TestWithdrawLeavesAnothers: withdrawing a worker whose registration is
// another owner's now leaves it, and succeeds.
func TestWithdrawLeavesAnothers(t *testing.T) {
	t.Parallel()
	st := newStore(time.Hour)
	a := start(t, st)
	a.Announce(first)
	st.waitHeld(t, a.Owner(), 10*time.Second)
	st.plant(second, "other", false)
	if err := a.Withdraw(context.Background()); err != nil {
		t.Fatalf("Withdraw = %v, want nil", err)
	}
	if h := st.holds(); h == nil || h.Owner != "other" {
		t.Errorf("store holds %+v, want the other's registration", h)
	}
	if a.Registered() {
		t.Error("Registered() = true after Withdraw")
	}
}

// Every Announcer has an owner token of its own, and registers with it.
func TestAnnouncerOwner(t *testing.T) {
	t.Parallel()
	a, b := discovery.NewAnnouncer(newStore(time.Hour), hclog.NewNullLogger()), discovery.NewAnnouncer(newStore(time.Hour), hclog.NewNullLogger())
	if a.Owner() == "" || a.Owner() == b.Owner() {
		t.Errorf("owners %q and %q, want two distinct tokens", a.Owner(), b.Owner())
	}
}
