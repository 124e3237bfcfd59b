package adapterkit

import (
	"context"
	"time"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// startPings opens the engine's PING connection (healthwatch.PingConn,
// watching "", the whole server) and the Busy judge of its checks, unless
// policy turns busy detection off (negative BusyTimeout). It dials within
// policy.Timeout; a failed dial is retried at the first PING.
func startPings(ctx context.Context, addr string, policy sdk.HealthPolicy) (*healthwatch.PingConn, *healthwatch.Busy) {
	if policy.BusyTimeout < 0 {
		return nil, nil
	}
	pings := healthwatch.NewPingConn(addr, "")
	dctx, cancel := context.WithTimeout(ctx, policy.Timeout)
	defer cancel()
	_ = pings.Renew(dctx)
	return pings, healthwatch.NewBusy(policy, pings)
}

// withBusy passes merged on, with Busy set on Serving events while busy
// says the engine is busy, and a Serving event of its own for each change
// of busy alone. It closes when merged closes.
func withBusy(ctx context.Context, engine string, merged <-chan sdk.Event, busy *healthwatch.Busy) <-chan sdk.Event {
	if busy == nil {
		return merged
	}
	out := make(chan sdk.Event)
	go func() {
		defer close(out)
		var last sdk.Event // as sent; Availability 0: nothing yet
		for {
			var ev sdk.Event
			select {
			case <-ctx.Done():
				return
			case e, ok := <-merged:
				if !ok {
					return
				}
				ev = e
				ev.Busy, _ = busy.State()
				ev.Busy = ev.Busy && ev.Availability == sdk.Serving
			case <-busy.Changed():
				b, _ := busy.State()
				if last.Availability != sdk.Serving || b == last.Busy {
					continue
				}
				ev = busyEvent(engine, b)
			}
			if !emit(ctx, out, ev) {
				return
			}
			last = ev
		}
	}()
	return out
}

// busyEvent is the Serving event for a change of busy alone.
func busyEvent(engine string, busy bool) sdk.Event {
	if busy {
		return sdk.Event{Availability: sdk.Serving, Busy: true, Time: time.Now(),
			Reason: engine + " engine busy: its health checks time out while its connection answers HTTP/2 PINGs"}
	}
	return sdk.Event{Availability: sdk.Serving, Time: time.Now(), Reason: engine + " engine serving: its health checks are answered again"}
}
