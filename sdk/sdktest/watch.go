package sdktest

import (
	"context"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// watcher reads an availability stream and holds every event to the rules
// of the stream (see the package documentation).
type watcher struct {
	t         tb
	ch        <-chan sdk.Event
	readiness bool // Capabilities.Readiness
	n         int  // events read
	last      sdk.Event
}

// watch calls e.WatchAvailability with ctx, failing t on an error.
func (k *kit) watch(t tb, e sdk.Engine, ctx context.Context) *watcher {
	t.Helper()
	readiness := k.info(t, e).Capabilities.Readiness
	events, err := await(t, "WatchAvailability", func() (<-chan sdk.Event, error) { return e.WatchAvailability(ctx) })
	if err != nil {
		t.Fatalf("WatchAvailability() after Start: error = %v, want nil", err)
	}
	if events == nil {
		t.Fatal("WatchAvailability() after Start returned a nil channel and no error")
	}
	return &watcher{t: t, ch: events, readiness: readiness}
}

// next returns the next event, or ok false when the channel closes, and
// fails t when nothing comes in time. what says what is awaited.
func (w *watcher) next(what string) (ev sdk.Event, ok bool) {
	w.t.Helper()
	ev, ok = receive(w.t, w.ch, within, what)
	if !ok {
		return ev, false
	}
	w.n++
	switch {
	case ev.Availability != sdk.Serving && ev.Availability != sdk.NotReady && ev.Availability != sdk.Lost && ev.Availability != sdk.Draining:
		w.t.Errorf("event %d = %v (%q), want Serving, NotReady, Draining or Lost", w.n, ev.Availability, ev.Reason)
	case ev.Availability == sdk.NotReady && !w.readiness:
		w.t.Errorf("event %d = %v (%q) from an adapter without Capabilities.Readiness, want Serving or Lost", w.n, ev.Availability, ev.Reason)
	case w.n > 1 && w.last.Availability == sdk.Lost:
		w.t.Errorf("event %d = %v (%q) after Lost, want the channel closed", w.n, ev.Availability, ev.Reason)
	case w.n > 1 && ev.Availability == w.last.Availability && ev.Busy == w.last.Busy:
		w.t.Errorf("event %d repeats %v (%q), want events only on change", w.n, ev.Availability, ev.Reason)
	}
	if ev.Availability == sdk.Lost && ev.Reason == sdk.ReasonStreamEnded {
		// Across the plugin boundary the sdk says Lost for such an adapter.
		w.t.Errorf("event %d = %v (%q): the adapter closed its availability channel without a Lost event, want Lost before the close", w.n, ev.Availability, ev.Reason)
	}
	if ev.Time.IsZero() {
		w.t.Errorf("event %d = %v (%q) has a zero Time, want when the adapter observed it", w.n, ev.Availability, ev.Reason)
	}
	w.last = ev
	return ev, true
}

// expect checks that the next event is want; why says what makes it so.
func (w *watcher) expect(want sdk.Availability, why string) sdk.Event {
	w.t.Helper()
	ev, ok := w.next("event " + why)
	if !ok {
		w.t.Fatalf("availability channel closed %s, want a %v event", why, want)
	}
	if ev.Availability != want {
		w.t.Fatalf("event %d = %v (%q) %s, want %v", w.n, ev.Availability, ev.Reason, why, want)
	}
	return ev
}

// lost reads events until Lost, allowing a NotReady or a Draining (an
// engine that drains before it stops) before it, then checks
// that the channel closes; why says what made the engine lost. It returns
// when Lost was received.
func (w *watcher) lost(why string) time.Time {
	w.t.Helper()
	for {
		ev, ok := w.next("Lost event " + why)
		if !ok {
			w.t.Fatalf("availability channel closed without a Lost event %s, want Lost before the close", why)
		}
		if ev.Availability == sdk.Lost {
			break
		}
		if ev.Availability != sdk.NotReady && ev.Availability != sdk.Draining {
			w.t.Errorf("event %d = %v (%q) %s, want Lost", w.n, ev.Availability, ev.Reason, why)
		}
	}
	got := time.Now()
	w.closed("after Lost")
	return got
}

// closed checks that the channel closes with no further event.
func (w *watcher) closed(why string) {
	w.t.Helper()
	if ev, ok := w.next("close " + why); ok {
		w.t.Errorf("event %v (%q) %s, want the channel closed", ev.Availability, ev.Reason, why)
	}
}

func checkFirstEventIsCurrent(t tb, k *kit) {
	t.Run("serving", func(t tb) {
		e := k.engine(t)
		addr, _ := k.serving(t)
		k.started(t, e, addr)
		k.watch(t, e, t.Context()).expect(sdk.Serving, "first, with the engine serving")
	})
	t.Run("not ready", func(t tb) {
		e := k.engine(t)
		k.needReadiness(t, e)
		k.need(t, "NotReady")
		addr, _ := k.serving(t)
		k.started(t, e, addr)
		k.h.NotReady(t, addr)
		k.watch(t, e, t.Context()).expect(sdk.NotReady, "first, with the engine made not ready after Start")
	})
	t.Run("failed", func(t tb) {
		k.need(t, "Fail")
		e := k.engine(t)
		addr, _ := k.serving(t)
		k.started(t, e, addr)
		k.h.Fail(t, addr)
		w := k.watch(t, e, t.Context())
		w.expect(sdk.Lost, "first, with the engine failed after Start")
		w.closed("after Lost")
	})
}

// watching starts e against a serving engine and watches it with ctx up to
// the first event, Serving; it returns the watch and the engine's address
// and stop.
func (k *kit) watching(t tb, ctx context.Context, e sdk.Engine) (w *watcher, addr string, stop func()) {
	t.Helper()
	addr, stop = k.serving(t)
	k.started(t, e, addr)
	w = k.watch(t, e, ctx)
	w.expect(sdk.Serving, "first")
	return w, addr, stop
}

func checkStoppedIsLost(t tb, k *kit) {
	e := k.engine(t)
	w, _, stop := k.watching(t, t.Context(), e)
	needStop(t, stop)
	stopInBackground(t, stop)
	w.lost("after the engine shut down")
}

func checkFailedIsLost(t tb, k *kit) {
	k.need(t, "Fail")
	w, addr, _ := k.watching(t, t.Context(), k.engine(t))
	k.h.Fail(t, addr)
	w.lost("after the engine reported failure")
}

// frozenHealth is the policy of FrozenIsLost: the kit's, with a shorter
// Timeout so that the loss shows sooner.
var frozenHealth = sdk.HealthPolicy{Interval: health.Interval, Timeout: 300 * time.Millisecond, Failures: health.Failures, RetryMax: health.RetryMax}

// proxied starts e against a serving engine behind the kit's proxy, with
// policy, and watches it up to the first event, Serving.
func (k *kit) proxied(t tb, e sdk.Engine, policy sdk.HealthPolicy) (*watcher, *proxy) {
	t.Helper()
	addr, _ := k.serving(t)
	p := newProxy(t, addr)
	req := k.startRequest(p.addr())
	req.Health = policy
	if _, err := start(t, e, t.Context(), req); err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", req.EngineAddr, err)
	}
	w := k.watch(t, e, t.Context())
	w.expect(sdk.Serving, "first")
	return w, p
}

func checkFrozenIsLost(t tb, k *kit) {
	w, p := k.proxied(t, k.engine(t), frozenHealth)
	frozen := time.Now()
	p.freeze()
	took := w.lost("after the engine froze").Sub(frozen)
	if bound := frozenHealth.Interval + time.Duration(frozenHealth.Failures)*frozenHealth.Timeout + frozenHealth.Timeout/4; took > bound+slack {
		t.Errorf("frozen engine Lost after %v, want within Interval + Failures*Timeout + Timeout/4 (one PING) = %v (and %v slack)", took, bound, slack)
	}
}

// slowHealth is the policy of SlowIsNotLost: one failed check is a loss,
// so a slow answer taken for a failure shows at once.
var slowHealth = sdk.HealthPolicy{Interval: health.Interval, Timeout: 2 * time.Second, Failures: 1, RetryMax: health.RetryMax}

// slowLatency is the proxy's latency each way in SlowIsNotLost: a round
// trip well within slowHealth.Timeout, and well above anything else.
const slowLatency = 250 * time.Millisecond

// slowFor is how long SlowIsNotLost watches the slow engine: a few checks.
const slowFor = 3 * 2 * slowLatency

func checkSlowIsNotLost(t tb, k *kit) {
	w, p := k.proxied(t, k.engine(t), slowHealth)
	p.slow(slowLatency)
	select {
	case ev, ok := <-w.ch:
		if !ok {
			t.Fatalf("availability channel closed with the engine's answers %v slow, want it open", 2*slowLatency)
		}
		t.Errorf("event %v (%q) with the engine's answers %v slow, want none: an answer within HealthPolicy.Timeout (%v) is never a failure", ev.Availability, ev.Reason, 2*slowLatency, slowHealth.Timeout)
	case <-time.After(slowFor):
	}
}

func checkNotReadyAndBack(t tb, k *kit) {
	e := k.engine(t)
	k.needReadiness(t, e)
	k.need(t, "NotReady", "Ready")
	w, addr, _ := k.watching(t, t.Context(), e)
	k.h.NotReady(t, addr)
	w.expect(sdk.NotReady, "after the engine was made not ready")
	k.h.Ready(t, addr)
	w.expect(sdk.Serving, "after the engine was made ready again")
}

func checkWatchCancel(t tb, k *kit) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, _, _ := k.watching(t, ctx, k.engine(t))
	cancel()
	// The engine serves on, so there is no change to tell.
	w.closed("after the watch's ctx ended")
}

// busyHealth is the policy of BusyIsNotLost: one failed check is a loss,
// so a busy check taken for a failure shows at once.
var busyHealth = sdk.HealthPolicy{Interval: health.Interval, Timeout: 200 * time.Millisecond, Failures: 1, RetryMax: health.RetryMax, BusyTimeout: 20 * time.Second}

// busyFor is how long BusyIsNotLost keeps the engine busy: many checks.
const busyFor = 3 * time.Second

// maxBusyPings is healthwatch.MaxBusyPings: grpc-go sends GOAWAY at a
// third ping strike.
const maxBusyPings = 3

func checkBusyIsNotLost(t tb, k *kit) {
	k.need(t, "CheckLatency")
	w, p := k.proxied(t, k.engine(t), busyHealth)
	k.h.CheckLatency(t, p.target, 3*busyHealth.Timeout)
	deadline := time.After(busyFor)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ch:
			if !ok {
				t.Fatalf("availability channel closed with the engine busy, want it open")
			}
			if ev.Availability != sdk.Serving {
				t.Fatalf("event %v (%q) with the engine's health checks %v late and its transport answering, want none but Serving (busy): a busy engine is not lost within BusyTimeout (%v)", ev.Availability, ev.Reason, 3*busyHealth.Timeout, busyHealth.BusyTimeout)
			}
		case <-deadline:
			done = true
		}
	}
	k.h.CheckLatency(t, p.target, 0)
	if n := p.streams.pings.Load(); n > maxBusyPings {
		t.Errorf("the adapter sent %d HTTP/2 PINGs in one busy episode, want at most %d: servers send GOAWAY too_many_pings at the third strike", n, maxBusyPings)
	}
	if n := p.streams.goaways.Load(); n > 0 {
		t.Errorf("the engine sent %d GOAWAYs while busy, want none", n)
	}
}
