package adapterkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// fake is a source the test feeds by hand; ended is closed when the source
// sees its context end.
type fake struct {
	name   string
	events chan sdk.Event
	ended  chan struct{}
}

func newFake(name string) *fake {
	return &fake{name: name, events: make(chan sdk.Event), ended: make(chan struct{})}
}

func (f *fake) source() adapterkit.Source {
	return adapterkit.Source{Name: f.name, Follow: func(ctx context.Context) <-chan sdk.Event {
		out := make(chan sdk.Event)
		go func() {
			defer close(out)
			defer close(f.ended)
			for {
				select {
				case ev, ok := <-f.events:
					if !ok {
						return
					}
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		return out
	}}
}

func (f *fake) send(a sdk.Availability, reason string) {
	f.events <- sdk.Event{Availability: a, Reason: reason, Time: time.Now()}
}

// TestMerge tells the story of a liveness and a readiness signal merged.
func TestMerge(t *testing.T) {
	t.Parallel()
	live, ready := newFake("live"), newFake("ready")
	ch := adapterkit.Merge(t.Context(), "Toy", live.source(), ready.source())
	events := sdktest.NewEvents(t, ch)

	// Nothing is sent before every source has reported.
	live.send(sdk.Serving, "live serves")
	select {
	case ev := <-ch:
		t.Fatalf("event %v %q before every source reported, want none", ev.Availability, ev.Reason)
	default:
	}
	ready.send(sdk.Serving, "ready serves")
	events.Expect(sdk.Serving, "Toy engine serving")
	// Only changes are sent.
	ready.send(sdk.Serving, "ready serves")
	ready.send(sdk.NotReady, "ready is paused")
	events.Expect(sdk.NotReady, "Toy engine not ready: ready is paused")
	ready.send(sdk.Serving, "ready serves")
	events.Expect(sdk.Serving, "Toy engine serving")
	// The worst state wins, and Lost ends everything.
	ready.send(sdk.NotReady, "ready is paused")
	events.Expect(sdk.NotReady, "Toy engine not ready: ready is paused")
	live.send(sdk.Lost, "live failed")
	events.Expect(sdk.Lost, "Toy engine lost: live failed")
	events.Closed()
	receive(t, live.ended, "the end of the live source")
	receive(t, ready.ended, "the end of the ready source")
}

// TestMergeLost: however a source says it, the engine is lost, and the
// stream ends.
func TestMergeLost(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		do   func(f *fake)
		want string
	}{
		"Lost":                    {func(f *fake) { f.send(sdk.Lost, "it failed") }, "Toy engine lost: it failed"},
		"an unknown availability": {func(f *fake) { f.send(sdk.AvailabilityUnknown, "what?") }, "Toy engine lost: what?"},
		"closing without Lost":    {func(f *fake) { close(f.events) }, "Toy engine lost: b: its watch ended without a final state"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := newFake("a"), newFake("b")
			events := sdktest.NewEvents(t, adapterkit.Merge(t.Context(), "Toy", a.source(), b.source()))
			a.send(sdk.Serving, "")
			b.send(sdk.Serving, "")
			events.Expect(sdk.Serving, "Toy engine serving")
			tt.do(b)
			events.Expect(sdk.Lost, tt.want)
			events.Closed()
			receive(t, a.ended, "the end of the other source")
		})
	}
}

// TestMergeLostFirst: a source lost before another reports is lost at once.
func TestMergeLostFirst(t *testing.T) {
	t.Parallel()
	a, b := newFake("a"), newFake("b")
	events := sdktest.NewEvents(t, adapterkit.Merge(t.Context(), "Toy", a.source(), b.source()))
	a.send(sdk.Serving, "")
	// b has not reported, so nothing is known yet; a loss is known alone
	// only once every source has spoken, which b now does.
	b.send(sdk.Lost, "b failed")
	events.Expect(sdk.Lost, "Toy engine lost: b failed")
	events.Closed()
}

// TestMergeCancel: ending ctx closes the stream without an event and ends
// the sources.
func TestMergeCancel(t *testing.T) {
	t.Parallel()
	a := newFake("a")
	ctx, cancel := context.WithCancel(t.Context())
	events := sdktest.NewEvents(t, adapterkit.Merge(ctx, "Toy", a.source()))
	a.send(sdk.Serving, "")
	events.Expect(sdk.Serving, "Toy engine serving")
	cancel()
	events.Closed()
	receive(t, a.ended, "the end of the source")
}

// TestMergeKeepsLostReason: a source that says Lost and then closes, as it
// should, before the others have reported, is lost for its own reason.
func TestMergeKeepsLostReason(t *testing.T) {
	t.Parallel()
	a, b := newFake("a"), newFake("b")
	events := sdktest.NewEvents(t, adapterkit.Merge(t.Context(), "Toy", a.source(), b.source()))
	b.send(sdk.Lost, "b failed")
	close(b.events)
	receive(t, b.ended, "the end of b")
	a.send(sdk.Serving, "")
	events.Expect(sdk.Lost, "Toy engine lost: b failed")
	events.Closed()
}
