// Package discoverytest provides what tests of a discovery.Discoverer
// share: running one for the length of a test and reading the sets it
// reports.
package discoverytest

import (
	"context"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
)

// Timeout bounds how long Next waits for a set: generous, so that a slow
// machine does not fail a test that would pass.
const Timeout = 10 * time.Second

// Watch runs d until the test ends and returns the sets it reports, each
// copied (update must not keep the slice).
func Watch(t testing.TB, d discovery.Discoverer) <-chan []discovery.Registration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sets := make(chan []discovery.Registration, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, func(rs []discovery.Registration) {
			select {
			case sets <- append([]discovery.Registration(nil), rs...):
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sets
}

// Next returns the next set, failing the test if none comes within
// Timeout.
func Next(t testing.TB, sets <-chan []discovery.Registration) []discovery.Registration {
	t.Helper()
	select {
	case rs := <-sets:
		return rs
	case <-time.After(Timeout):
		t.Fatalf("no set of workers within %s", Timeout)
		return nil
	}
}
