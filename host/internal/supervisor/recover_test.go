package supervisor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// waitOnLoss configures the harness for --on-loss=wait, counting the
// adapter's launches in launches.
func waitOnLoss(launches *atomic.Int32) func(*Config) {
	return func(c *Config) {
		c.WaitOnLoss = true
		c.DrainTimeout = time.Hour
		c.Start.StartupDeadline = time.Minute
		launch := c.Launch
		c.Launch = func(ctx context.Context) (Adapter, error) {
			launches.Add(1)
			return launch(ctx)
		}
	}
}

// instance waits until the worker's record holds instance id want.
func (h *harness) instance(want string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if recs := h.holds(); len(recs) == 1 && recs[0].InstanceID == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the worker was not registered with instance id %s; the registry holds %+v", want, h.holds())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// running fails the test if Run has returned.
func (h *harness) running() {
	h.t.Helper()
	select {
	case err := <-h.out:
		h.t.Fatalf("Run returned %v; want it waiting for the engine again", err)
	default:
	}
}

// With --on-loss=wait a lost engine, or one whose drain on purpose ended,
// does not end Run: the worker is withdrawn, the adapter restarted, and
// the next engine registered as a fresh start registers one (its instance
// id, the endpoint attached to it), the endpoint's liveness never turning
// NOT_SERVING; a stop then drains and ends Run with nil.
func TestWaitOnLossWaitsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		loss  sdk.Availability
		cause string
	}{{"lost", sdk.Lost, CauseLost}, {"drained", sdk.Draining, CauseDraining}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var launches atomic.Int32
			rec := &recorder{}
			e, ep := newFakeEngine(), &fakeEndpoint{}
			e.generate = true
			h := startHarnessWith(t, e, ep, func(c *Config) { waitOnLoss(&launches)(c); c.Observer = rec })
			<-e.startCtx
			h.send(sdk.Serving)
			h.instance("i1")
			h.send(tc.loss)
			h.registered(false)
			<-e.startCtx // the relaunched adapter's Start
			<-h.killed   // the first adapter, killed before the second launched
			h.running()
			if n := launches.Load(); n != 2 {
				t.Errorf("the adapter was launched %d times, want 2", n)
			}
			h.send(sdk.Serving)
			h.instance("i2")
			if w := ep.Attached(); w == nil || w.InstanceID != "i2" {
				t.Errorf("the endpoint is attached to %+v, want the new engine i2", w)
			}
			ep.mu.Lock()
			stopping := ep.stopping
			ep.mu.Unlock()
			if stopping {
				t.Error("the endpoint was told vigil is stopping (liveness NOT_SERVING) while it waited for the engine again")
			}
			h.signal()
			h.ended(nil)
			h.registered(false)
			want := []string{"entered launching", "entered waiting", "entered started", "availability " + sdk.Serving.String(), "entered serving",
				"availability " + tc.loss.String(), "withdrawn " + tc.cause,
				map[string]string{CauseLost: "entered draining", CauseDraining: "entered engine-draining"}[tc.cause],
				"recovered " + tc.cause, "entered launching", "entered waiting", "entered started", "availability " + sdk.Serving.String(), "entered serving",
				"withdrawn stop", "entered draining", "entered stopped"}
			if diff := cmp.Diff(want, rec.get()); diff != "" {
				t.Errorf("Observer (-want +got):\n%s", diff)
			}
		})
	}
}

// A stop signal during the drain after a loss, under --on-loss=wait, lets
// the drain finish (it is a first signal, not a second) and ends Run with
// nil, without waiting for the engine again; the endpoint is then told
// vigil is stopping.
func TestWaitOnLossStopWhileDraining(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	logs := &logBuffer{}
	e, ep := newFakeEngine(), &fakeEndpoint{release: make(chan struct{})}
	h := startHarnessWith(t, e, ep, func(c *Config) {
		waitOnLoss(&launches)(c)
		c.GracePeriod, c.Logger = time.Minute, logs.logger()
	})
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.registered(false)
	h.signal()
	logs.await(t, "exiting once the drain ends instead of waiting for the engine again")
	h.running() // the request in flight still finishes
	close(ep.release)
	h.ended(nil)
	if n := launches.Load(); n != 1 {
		t.Errorf("the adapter was launched %d times, want 1: a stop came", n)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !ep.stopping {
		t.Error("the endpoint was not told vigil is stopping")
	}
}

// Each wait after a loss is bounded by the startup deadline, which ends
// Run as at a first start.
func TestWaitOnLossStartupDeadline(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	e := newFakeEngine()
	h := startHarnessWith(t, e, &fakeEndpoint{}, waitOnLoss(&launches))
	<-e.startCtx
	h.send(sdk.Serving)
	h.registered(true)
	e.mu.Lock()
	e.startErr = sdk.ErrStartupDeadline // the next engine never serves
	e.mu.Unlock()
	h.send(sdk.Lost)
	<-e.startCtx
	h.ended(outcome.ErrStartupDeadline)
	if n := launches.Load(); n != 2 {
		t.Errorf("the adapter was launched %d times, want 2", n)
	}
}

// A hung adapter under --on-loss=wait is killed at once (SIGKILL), its
// requests ended at once, and a new adapter launched, whose engine is
// registered again.
func TestWaitOnLossHungAdapter(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	a := &hungAdapter{killedNow: make(chan struct{})}
	rec := &recorder{}
	e, ep := newFakeEngine(), &fakeEndpoint{release: make(chan struct{})}
	e.generate = true
	h := startHarnessWith(t, e, ep, func(c *Config) {
		waitOnLoss(&launches)(c)
		a.configure(c)
		c.Observer = rec
	})
	<-e.startCtx
	h.send(sdk.Serving)
	h.instance("i1")
	a.frozen.Store(true)
	<-a.killedNow
	a.frozen.Store(false) // the next adapter answers
	<-e.startCtx
	h.running()
	if got := ep.Abandoned(); got == "" {
		t.Error("the hung adapter's requests in flight were not ended at once")
	}
	h.send(sdk.Serving)
	h.instance("i2")
	h.signal()
	h.ended(nil)
	if n := launches.Load(); n != 2 {
		t.Errorf("the adapter was launched %d times, want 2", n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutdowns != 1 { // the second adapter's, at the stop
		t.Errorf("Shutdown called %d times, want once: the hung adapter is not asked", e.shutdowns)
	}
	if !hasEvent(rec.get(), "recovered "+CauseHung) {
		t.Errorf("Observer not told of the recovery from a hung adapter: %v", rec.get())
	}
}

// A duplicate worker id found after a recovery still ends Run with
// outcome.ErrConfig: the Announcer, run once, still watches.
func TestWaitOnLossDuplicateWorkerID(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	e := newFakeEngine()
	h := startHarnessWith(t, e, &fakeEndpoint{}, waitOnLoss(&launches))
	<-e.startCtx
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.registered(false)
	<-e.startCtx
	// Meanwhile another vigil took the worker id, and renews it.
	other := discovery.Registration{Service: "llm", WorkerID: "w1", Engine: "fake", Address: "127.0.0.9", Port: 9, Owner: "other"}
	reg := file.New(h.dir, time.Minute)
	if err := reg.Register(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for ctx.Err() == nil {
			_ = reg.Heartbeat(ctx, other)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	h.send(sdk.Serving)
	h.ended(outcome.ErrConfig)
	cancel()
	<-renewed
}

func hasEvent(events []string, want string) bool {
	for _, e := range events {
		if e == want {
			return true
		}
	}
	return false
}

// Under --on-loss=wait, the Tokenizer hook of an engine lost while it
// loaded finishes before the next engine's starts, so the endpoint keeps
// the tokenizer of the engine serving, not of the one lost.
func TestWaitOnLossTokenizerHooksInOrder(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	e := newFakeEngine()
	calls, release := make(chan string, 2), make(chan struct{})
	h := startHarnessWith(t, e, &fakeEndpoint{}, func(c *Config) {
		waitOnLoss(&launches)(c)
		c.Tokenizer = func(w sdk.Worker) (bool, bool) {
			calls <- w.InstanceID
			if w.InstanceID == "i1" {
				<-release
			}
			return true, false
		}
	})
	<-e.startCtx
	if got := <-calls; got != "i1" {
		t.Fatalf("first hook for %q, want i1", got)
	}
	h.send(sdk.Lost)
	<-e.startCtx // the relaunched adapter's Start
	select {
	case got := <-calls:
		t.Fatalf("the hook for %q started while the lost engine's was loading", got)
	case <-time.After(100 * time.Millisecond): // an absence: nothing to await
	}
	close(release)
	if got := <-calls; got != "i2" {
		t.Errorf("second hook for %q, want i2", got)
	}
	h.signal()
	h.ended(nil)
}
