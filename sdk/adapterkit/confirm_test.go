package adapterkit

import (
	"testing"
	"time"
)

// TestHold: a down value shorter than the hold never passes, one that
// lasts passes once the hold has passed, and anything else passes at once.
func TestHold(t *testing.T) {
	t.Parallel()
	const d = 500 * time.Millisecond
	in := make(chan string)
	out := hold(t.Context(), in, d, func(s string) bool { return s == "down" })
	got := func(want string, within time.Duration) {
		t.Helper()
		select {
		case v := <-out:
			if v != want {
				t.Fatalf("got %q, want %q", v, want)
			}
		case <-time.After(within):
			t.Fatalf("nothing within %v, want %q", within, want)
		}
	}
	in <- "up"
	got("up", time.Second)
	// A blip: down, then up within d.
	in <- "down"
	in <- "up"
	got("up", time.Second)
	select {
	case v := <-out:
		t.Fatalf("got %q after a blip shorter than the hold, want nothing", v)
	case <-time.After(2 * d):
	}
	// Held: down for longer than d passes after d, and later downs at once.
	start := time.Now()
	in <- "down"
	got("down", time.Second)
	if took := time.Since(start); took < d {
		t.Errorf("down passed after %v, want not before the hold %v", took, d)
	}
	in <- "down"
	got("down", d/2)
	// A failure passes at once, and drops a down still held.
	in <- "up"
	got("up", time.Second)
	in <- "down"
	in <- "failed"
	got("failed", d/2)
	close(in)
	if _, ok := <-out; ok {
		t.Error("channel open after in closed")
	}
}
