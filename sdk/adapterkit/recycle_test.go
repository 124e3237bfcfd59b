package adapterkit_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// recycling makes an engine's server recycle its connections: GOAWAY after
// MaxConnectionAge, the connection closed MaxConnectionAgeGrace later with
// the health Watch streams it carries.
var recycling = grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond})

// startCounting starts s against e's address with its lifetime id reads
// told on the returned channel, and returns the availability stream after
// its first event, Serving.
func startCounting(t *testing.T, s adapterkit.Spec, addr string) (<-chan sdk.Event, <-chan string) {
	t.Helper()
	reads := make(chan string, 100)
	if s.LifetimeID != nil {
		read := s.LifetimeID
		s.LifetimeID = func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
			id, err := read(ctx, conn)
			if err == nil {
				reads <- id
			}
			return id, err
		}
	}
	a := start(t, s, addr)
	events, err := a.WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event = %v %q, want Serving", ev.Availability, ev.Reason)
	}
	return events, reads
}

// noEventWhile fails the test if an event comes before n values from ch.
func noEventWhile[T any](t *testing.T, events <-chan sdk.Event, ch <-chan T, n int, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-ch:
		case ev := <-events:
			t.Fatalf("event %v %q after %d %s, want none", ev.Availability, ev.Reason, i, what)
		case <-time.After(within):
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// TestRecycledConnection: an engine whose server recycles its connections
// (MaxConnectionAge, or a proxy in front) is no loss: each recycle is
// followed by a read of the lifetime id, the same one, and the health
// Watch is reopened on the new connection, with no event over several
// recycles. NOT_SERVING and another lifetime id are still Lost.
func TestRecycledConnection(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		lose func(t *testing.T, p *port, e *engine)
		want string
	}{
		"NOT_SERVING": {func(_ *testing.T, _ *port, e *engine) { e.SetServingStatus("", notServing) }, `Toy engine lost: health of "" is NOT_SERVING`},
		"new lifetime id": {func(t *testing.T, p *port, e *engine) {
			e.stop()
			serveEngine(t, p, "b", recycling)
			// The new id, or the old engine's connection cut under the
			// reopened Watch, tells first: both are the loss.
		}, `Toy engine lost: `},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := listen(t)
			e := serveEngine(t, p, "a", recycling)
			events, reads := startCounting(t, spec(true), e.addr)
			noEventWhile(t, events, reads, 3, "lifetime id reads after recycled connections")
			tt.lose(t, p, e)
			expectLost(t, events, tt.want)
		})
	}
}

// expectLost checks that the next event is Lost with a reason starting want.
func expectLost(t *testing.T, events <-chan sdk.Event, want string) {
	t.Helper()
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, want) {
			t.Fatalf("event = %v %q, want Lost %q", ev.Availability, ev.Reason, want)
		}
	case <-time.After(within):
		t.Fatalf("no event within %v, want Lost %q", within, want)
	}
}

// lateLifetime makes s's lifetime id reads, once armed, tell entered and
// wait until release is closed: an engine whose answer is late.
func lateLifetime(s *adapterkit.Spec) (armed *atomic.Bool, entered chan struct{}, release chan struct{}) {
	armed, entered, release = new(atomic.Bool), make(chan struct{}, 100), make(chan struct{})
	read := s.LifetimeID
	s.LifetimeID = func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
		if armed.Load() {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return read(ctx, conn)
	}
	return armed, entered, release
}

// TestReopenedWatchReplacedEngine: the engine behind the address is
// replaced, and the health Watch streams reopened on the new connection
// reach the new process, still loading (readiness NOT_SERVING, then
// SERVING), before the lifetime id read answers. None of its statuses
// reaches the host: each reopened stream waits for its own read of the
// lifetime id, another one, and the host sees Lost only, never NotReady
// or Serving from the new process.
func TestReopenedWatchReplacedEngine(t *testing.T) {
	t.Parallel()
	p := listen(t)
	old := serveEngine(t, p, "a")
	s := spec(true)
	armed, entered, release := lateLifetime(&s)
	events, _ := startCounting(t, s, old.addr)

	armed.Store(true)
	old.stop()
	replacement := serveLoading(t, p, "b", []string{inference})
	// LifetimeSource's read, and one per reopened Watch ("" and
	// toy.Inference), each after its stream's first status.
	noEventWhile(t, events, entered, 3, "late lifetime id reads")
	replacement.SetServingStatus(inference, serving)
	close(release)
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost || !strings.Contains(ev.Reason, `engine replaced: instance id "b", was "a"`) {
			t.Fatalf("event = %v %q, want Lost naming the replacement", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		t.Fatalf("no event within %v, want Lost", within)
	}
	if ev, ok := <-events; ok {
		t.Fatalf("event %v %q after Lost, want the stream closed", ev.Availability, ev.Reason)
	}
}

// TestReopenedWatchNoLifetimeID: an engine without a lifetime id has
// nothing to confirm, so nothing is held: the connection closing is Lost
// at once, as before.
func TestReopenedWatchNoLifetimeID(t *testing.T) {
	t.Parallel()
	p := listen(t)
	old := serveEngine(t, p, "a")
	events, _ := startCounting(t, spec(false), old.addr)
	old.stop()
	serveEngine(t, p, "b")
	expectLost(t, events, "Toy engine lost: engine connection closed")
}
