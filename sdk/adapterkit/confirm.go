package adapterkit

import (
	"context"
	"time"
)

// hold passes in's values on in order, except that a down one (an answer
// that the signal does not serve) waits d first: a value that is not down
// within d, a SERVING answer or a failed watch, drops it, so a health blip
// shorter than d is never seen (sdk.HealthPolicy.Confirm). While a down
// value waits, a later down one takes its place and the wait goes on; once
// one has passed, down values pass at once. d <= 0 passes everything at
// once. The channel closes when in closes or ctx ends; a value still
// waiting then is dropped.
func hold[T any](ctx context.Context, in <-chan T, d time.Duration, down func(T) bool) <-chan T {
	if d <= 0 {
		return in
	}
	out := make(chan T)
	go func() {
		defer close(out)
		defer func() {
			for range in {
				// The producer sees ctx too; drain until it closes.
			}
		}()
		var (
			pending  *T
			released bool // a down value has passed: the signal is down
			timer    = time.NewTimer(d)
			fire     <-chan time.Time
		)
		timer.Stop()
		defer timer.Stop()
		for {
			var send T
			select {
			case <-ctx.Done():
				return
			case v, ok := <-in:
				if !ok {
					return
				}
				switch {
				case down(v) && released:
					send = v
				case down(v):
					if pending == nil {
						timer.Reset(d)
						fire = timer.C
					}
					pending = &v
					continue
				default:
					pending, released, fire = nil, false, nil
					timer.Stop()
					send = v
				}
			case <-fire:
				send, pending, released, fire = *pending, nil, true, nil
			}
			select {
			case out <- send:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
