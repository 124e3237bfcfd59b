package adapterkit

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// Source is one signal as Merge follows it.
type Source struct {
	// Name names the signal in reasons, e.g. `health of ""`.
	Name string
	// Follow starts following the signal: it sends the signal's current
	// state first, then every change, and closes the channel after Lost or
	// when ctx ends.
	Follow func(ctx context.Context) <-chan sdk.Event
}

// Merge follows several signals of one engine as one availability stream,
// the way sdk.Engine.WatchAvailability sends it. Each source sends the
// state of one signal (Serving, NotReady, Draining or Lost), the current one first,
// and closes its channel after Lost or when its context ends; Merge starts
// every source with a context of its own and ends them all when it ends.
//
// The merged state is the worst latest state of all sources, Lost over
// Draining over NotReady over Serving. Merge sends it first once every source has
// reported, so nothing is called serving before every signal says so, and
// then on every change. Reasons start with engine ("vLLM engine lost: ...").
// Lost is terminal: a source that reports it, or closes without it, ends
// the stream with Lost. Merge closes its channel after Lost or when ctx
// ends.
func Merge(ctx context.Context, engine string, sources ...Source) <-chan sdk.Event {
	out := make(chan sdk.Event)
	ctx, cancel := context.WithCancel(ctx)
	reports := make(chan report)
	for i, src := range sources {
		go forward(ctx, i, src.Follow(ctx), reports)
	}
	go func() {
		defer close(out)
		defer cancel()
		merge(ctx, engine, sources, reports, out)
	}()
	return out
}

// report is one source's event, or its close (ok false).
type report struct {
	i  int
	ev sdk.Event
	ok bool
}

// forward passes source i's events on as reports until it closes or ctx
// ends.
func forward(ctx context.Context, i int, events <-chan sdk.Event, reports chan<- report) {
	for {
		ev, ok := <-events
		select {
		case reports <- report{i, ev, ok}:
		case <-ctx.Done():
			// Drain so the source, which also sees ctx, can close.
			for range events {
			}
			return
		}
		if !ok {
			return
		}
	}
}

// merge sends the worst latest state of the sources on out, on change,
// until Lost or ctx ends.
func merge(ctx context.Context, engine string, sources []Source, reports <-chan report, out chan<- sdk.Event) {
	latest := make([]*sdk.Event, len(sources))
	sent := sdk.AvailabilityUnknown
	for {
		var r report
		select {
		case <-ctx.Done():
			return
		case r = <-reports:
		}
		if !r.ok {
			if prev := latest[r.i]; prev != nil && rank(prev.Availability) == rank(sdk.Lost) {
				continue // closed after its Lost, as it should
			}
			r.ev = event(sdk.Lost, timeNow(), "%s: its watch ended without a final state", sources[r.i].Name)
		}
		latest[r.i] = &r.ev
		worst, known := worstOf(latest)
		if !known || worst.Availability == sent {
			continue
		}
		sent = worst.Availability
		ev := merged(engine, *worst)
		if !emit(ctx, out, ev) || ev.Availability == sdk.Lost {
			return
		}
	}
}

// merged is the merged stream's event for the worst source's ev.
func merged(engine string, ev sdk.Event) sdk.Event {
	switch ev.Availability {
	case sdk.Serving:
		ev.Reason = engine + " engine serving"
	case sdk.NotReady:
		ev.Reason = engine + " engine not ready: " + ev.Reason
	case sdk.Draining:
		ev.Reason = engine + " engine draining: " + ev.Reason
	default:
		ev.Availability = sdk.Lost
		ev.Reason = engine + " engine lost: " + ev.Reason
	}
	return ev
}

// worstOf returns the worst of the latest events, and whether every source
// has reported.
func worstOf(latest []*sdk.Event) (*sdk.Event, bool) {
	var worst *sdk.Event
	for _, ev := range latest {
		if ev == nil {
			return nil, false
		}
		if worst == nil || rank(ev.Availability) > rank(worst.Availability) {
			worst = ev
		}
	}
	return worst, worst != nil
}

// rank orders availabilities from best to worst; anything unknown is Lost.
func rank(a sdk.Availability) int {
	switch a {
	case sdk.Serving:
		return 0
	case sdk.NotReady:
		return 1
	case sdk.Draining:
		return 2
	}
	return 3
}

// timeNow is time.Now; events carry the time of the observation.
var timeNow = time.Now

func event(a sdk.Availability, at time.Time, format string, args ...any) sdk.Event {
	if at.IsZero() {
		at = timeNow()
	}
	return sdk.Event{Availability: a, Reason: fmt.Sprintf(format, args...), Time: at}
}

// emit sends ev on out unless ctx ends first, and reports whether it did.
func emit(ctx context.Context, out chan<- sdk.Event, ev sdk.Event) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// relayEvents maps every value of in to an event on the returned channel,
// which closes after Lost, when in closes, or when ctx ends.
func relayEvents[T any](ctx context.Context, in <-chan T, f func(T) sdk.Event) <-chan sdk.Event {
	out := make(chan sdk.Event)
	go func() {
		defer close(out)
		for v := range in {
			ev := f(v)
			if !emit(ctx, out, ev) || ev.Availability == sdk.Lost {
				break
			}
		}
		for range in {
			// The producer sees ctx too; drain until it closes.
		}
	}()
	return out
}
