package healthwatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// MaxBusyPings is the most PINGs [Busy] sends in one busy episode: a
// grpc-go server sends GOAWAY at its third ping strike, and the first PING
// after the server has written anything (the Watch that [PingConn.Renew]
// reopens at the end of each episode) clears the strikes, so three PINGs
// make two strikes at most.
const MaxBusyPings = 3

// Pinger sends one HTTP/2 PING and waits for its acknowledgement until ctx
// ends; [PingConn] is one.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Busy tells a busy engine from a frozen one for the checks [PollBusy]
// runs, under policy.BusyTimeout. A busy episode starts at the first check
// that times out after an answer and ends at the next answer. At a
// timed-out check Busy sends one PING, waiting policy.Timeout/4 for it: an
// answered PING makes the check busy, not failed, for BusyTimeout/3 from
// then (a lease; later timed-out checks within it send nothing); an
// unanswered one is a failure, and no further PING is sent in the episode.
// At most MaxBusyPings go out per episode, and once the episode has lasted
// BusyTimeout every timed-out check is a failure again. So a frozen engine
// costs one PING wait more than it would without Busy, and a freeze in
// mid-episode is found within BusyTimeout/3 of the last answered PING plus
// that.
//
// One Busy serves every signal of one engine, so that the PINGs of one
// episode are counted once. Its methods are safe for concurrent use.
type Busy struct {
	timeout  time.Duration // policy.BusyTimeout; negative: off
	pingWait time.Duration
	pinger   Pinger

	mu         sync.Mutex
	start      time.Time // the episode's first timed-out check; zero: no episode
	pings      int
	lease      time.Time // timed-out checks before it are busy
	unanswered bool      // the episode's last PING went unanswered
	busy       bool      // as last reported
	episodes   int
	changed    chan struct{}
}

// NewBusy returns a Busy that pings with p under policy (zero fields take
// the defaults).
func NewBusy(policy sdk.HealthPolicy, p Pinger) *Busy {
	policy = policy.WithDefaults()
	return &Busy{timeout: policy.BusyTimeout, pingWait: policy.Timeout / 4, pinger: p, changed: make(chan struct{}, 1)}
}

// Judge decides a check that timed out with err: nil when the engine is
// busy, else an error wrapping err. ctx bounds the PING.
func (b *Busy) Judge(ctx context.Context, err error) error {
	if b == nil || b.timeout < 0 {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.start.IsZero() {
		b.start, b.pings, b.lease, b.unanswered = now, 0, time.Time{}, false
	}
	switch {
	case now.Sub(b.start) >= b.timeout:
		return fmt.Errorf("%w (busy for %s, the busy timeout is %s)", err, now.Sub(b.start).Round(time.Millisecond), b.timeout)
	case now.Before(b.lease):
		return nil
	case b.unanswered:
		return fmt.Errorf("%w, and the engine's connection left an HTTP/2 PING unanswered", err)
	case b.pings >= MaxBusyPings:
		return err
	}
	b.pings++
	pctx, cancel := context.WithTimeout(ctx, b.pingWait)
	perr := b.pinger.Ping(pctx)
	cancel()
	if perr != nil {
		b.unanswered = true
		return fmt.Errorf("%w, and the engine's connection did not answer an HTTP/2 PING within %s: %v", err, b.pingWait, perr)
	}
	b.lease = time.Now().Add(b.timeout / MaxBusyPings)
	b.setLocked(true)
	return nil
}

// Answered ends the busy episode, if any: a check was answered. When the
// episode sent a PING and the Pinger can Renew (PingConn), it renews in the
// background, so that the next episode's PINGs start from no strikes.
func (b *Busy) Answered() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.start.IsZero() {
		return
	}
	pinged := b.pings > 0
	b.start = time.Time{}
	b.setLocked(false)
	if r, ok := b.pinger.(interface{ Renew(context.Context) error }); ok && pinged {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), b.pingWait*4)
			defer cancel()
			_ = r.Renew(ctx)
		}()
	}
}

func (b *Busy) setLocked(busy bool) {
	if b.busy == busy {
		return
	}
	if busy {
		b.episodes++
	}
	b.busy = busy
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// State reports whether the engine is busy now, and how many busy
// episodes there have been.
func (b *Busy) State() (busy bool, episodes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy, b.episodes
}

// Changed returns a channel that receives after busy changes (one value
// for any number of changes not yet received); read State then.
func (b *Busy) Changed() <-chan struct{} { return b.changed }
