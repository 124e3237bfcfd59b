package adapterkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

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

// connCounter tells each connection a server accepts.
type connCounter chan struct{}

func (c connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		c <- struct{}{}
	}
}

// TestRecycledConnectionNoLifetimeID: without a lifetime id, a connection
// the engine recycles (GOAWAY first) is reconnected and carries on, over
// several recycles, and NOT_SERVING is still Lost. One the engine closes
// without GOAWAY is Lost at once (TestEngineReplaced).
func TestRecycledConnectionNoLifetimeID(t *testing.T) {
	t.Parallel()
	conns := make(connCounter, 100)
	e := serveEngine(t, nil, "", recycling, grpc.StatsHandler(conns))
	events, _ := startCounting(t, spec(false), e.addr)
	receive(t, conns, "the first connection")
	noEventWhile(t, events, conns, 4, "connections after recycled ones")
	e.SetServingStatus("", notServing)
	expectLost(t, events, `Toy engine lost: health of "" is NOT_SERVING`)
}
