package sdktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// Events reads an availability stream in an adapter's own tests, failing
// the test when what it waits for does not come within 30 s. Create it
// with Watch or NewEvents.
type Events struct {
	t  testing.TB
	ch <-chan sdk.Event
}

// Watch calls e.WatchAvailability for the rest of the test and returns its
// stream; it fails t when the call fails.
func Watch(t testing.TB, e sdk.Engine) *Events {
	t.Helper()
	ch, err := e.WatchAvailability(t.Context())
	if err != nil {
		t.Fatalf("WatchAvailability() = %v, want nil", err)
	}
	return NewEvents(t, ch)
}

// NewEvents reads ch, a stream of availability events such as
// WatchAvailability returns.
func NewEvents(t testing.TB, ch <-chan sdk.Event) *Events { return &Events{t: t, ch: ch} }

// Next returns the next event. It fails the test when the stream closes,
// when no event comes in time, or when the event has no Time.
func (e *Events) Next() sdk.Event {
	e.t.Helper()
	select {
	case ev, ok := <-e.ch:
		if !ok {
			e.t.Fatal("availability stream closed, want another event")
		}
		if ev.Time.IsZero() {
			e.t.Errorf("event %v %q has a zero Time, want when it was observed", ev.Availability, ev.Reason)
		}
		return ev
	case <-time.After(within):
		e.t.Fatalf("no availability event within %v", within)
	}
	panic("unreachable")
}

// Expect checks that the next event is want with a reason that starts with
// reasonPrefix, and returns it.
func (e *Events) Expect(want sdk.Availability, reasonPrefix string) sdk.Event {
	e.t.Helper()
	ev := e.Next()
	if ev.Availability != want || !strings.HasPrefix(ev.Reason, reasonPrefix) {
		e.t.Fatalf("event = %v %q, want %v with a reason starting %q", ev.Availability, ev.Reason, want, reasonPrefix)
	}
	return ev
}

// Closed checks that the stream closes with no further event.
func (e *Events) Closed() {
	e.t.Helper()
	select {
	case ev, ok := <-e.ch:
		if ok {
			e.t.Fatalf("event %v %q, want the availability stream closed", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		e.t.Fatalf("availability stream still open after %v", within)
	}
}

// Start starts e with req under a bound of 30 s, fails t unless it
// succeeds, and shuts e down when t ends; for an adapter's own tests.
func Start(t testing.TB, e sdk.Engine, req sdk.StartRequest) sdk.Worker {
	t.Helper()
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown() = %v, want nil", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	w, err := e.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start(%s) = %v, want nil", req.EngineAddr, err)
	}
	return w
}
