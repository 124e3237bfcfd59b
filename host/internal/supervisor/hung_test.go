package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// hungAdapter makes the harness's adapter answer its pings until frozen is
// set, and then none, as a stopped process; killedNow closes at KillNow.
type hungAdapter struct {
	frozen    atomic.Bool
	killedNow chan struct{}
	once      sync.Once // KillNow of a relaunched adapter too
}

// pingPolicy is a quick health policy: a hung adapter is found within
// Interval + Failures*Timeout, 120ms.
var pingPolicy = sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond, Failures: 2}

func (a *hungAdapter) configure(c *Config) {
	launch := c.Launch
	c.Start.Health = pingPolicy
	c.GracePeriod = time.Minute // never waited for
	c.Launch = func(ctx context.Context) (Adapter, error) {
		ad, err := launch(ctx)
		ad.Ping = func(ctx context.Context) error {
			if a.frozen.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		ad.KillNow = func() { a.once.Do(func() { close(a.killedNow) }) }
		return ad, err
	}
}

// An adapter that stops answering its pings, serving or while it waits
// for the engine, is a loss go-plugin would not report: within the
// policy's bound the worker is withdrawn, its requests in flight end at
// once (Abandon, not the grace period), the adapter is killed at once and
// not asked to shut down, and Run returns outcome.ErrEngineLost.
func TestAdapterHung(t *testing.T) {
	t.Parallel()
	for _, serving := range []bool{true, false} {
		name := map[bool]string{true: "serving", false: "waiting"}[serving]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := &hungAdapter{killedNow: make(chan struct{})}
			e := newFakeEngine()
			e.generate = true
			if !serving {
				e.startBlock = make(chan struct{}) // never serves
			}
			ep := &fakeEndpoint{release: make(chan struct{})}
			h := startHarnessWith(t, e, ep, a.configure)
			if serving {
				h.send(sdk.Serving)
				h.registered(true)
			} else {
				<-e.startCtx
			}
			frozen := time.Now()
			a.frozen.Store(true)
			select {
			case <-a.killedNow:
			case <-time.After(10 * time.Second):
				t.Fatal("the hung adapter was not killed at once")
			}
			err := h.exit()
			if !errors.Is(err, outcome.ErrEngineLost) || !strings.Contains(err.Error(), "engine adapter not answering") {
				t.Errorf("Run returned %v, want ErrEngineLost saying the adapter is not answering", err)
			}
			// Found within 120ms; a second for a loaded machine, far
			// below the grace period of a minute.
			if d := time.Since(frozen); d > 2*time.Second {
				t.Errorf("Run returned %s after the adapter froze, want within 2s", d)
			}
			h.registered(false)
			if got := ep.Abandoned(); serving != strings.Contains(got, "not answering") {
				t.Errorf("endpoint abandoned with %q, want its requests ended saying the adapter is not answering: %v", got, serving)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.shutdowns != 0 {
				t.Errorf("the hung adapter was asked to shut down %d times, want none", e.shutdowns)
			}
		})
	}
}

// Only a ping unanswered within the timeout counts: one that fails at once
// (the adapter exited, its connection broke, or it serves no go-plugin
// health service) is left to the exit and the watch, which report it.
func TestAdapterPingFailsFast(t *testing.T) {
	t.Parallel()
	pinged := make(chan struct{}, 1)
	var pings atomic.Int32
	killedNow := make(chan struct{})
	e := newFakeEngine()
	h := startHarnessWith(t, e, &fakeEndpoint{}, func(c *Config) {
		launch := c.Launch
		c.Start.Health = pingPolicy
		c.Launch = func(ctx context.Context) (Adapter, error) {
			ad, err := launch(ctx)
			ad.Ping = func(context.Context) error {
				if pings.Add(1) == 10 {
					pinged <- struct{}{}
				}
				return errors.New("unknown service plugin")
			}
			ad.KillNow = func() { close(killedNow) }
			return ad, err
		}
	})
	h.send(sdk.Serving)
	h.registered(true)
	select { // ten pings: the pinging did not end at the second
	case <-pinged:
	case <-time.After(10 * time.Second):
		t.Fatal("the adapter was not pinged ten times: its failing pings were counted")
	}
	select {
	case <-killedNow:
		t.Fatal("an adapter whose pings fail at once was killed as hung")
	default:
	}
	h.registered(true)
	h.send(sdk.Lost)
	h.ended(outcome.ErrEngineLost)
}
