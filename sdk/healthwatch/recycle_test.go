package healthwatch_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// recycling is how a server that recycles its connections is configured:
// GOAWAY after MaxConnectionAge (±10% jitter), the connection closed
// MaxConnectionAgeGrace later, whatever streams it still carries.
var recycling = keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond}

// countedWatch is grpc-go's health server telling each Watch call.
type countedWatch struct {
	*health.Server
	watches chan struct{}
}

func (h countedWatch) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.watches <- struct{}{}
	return h.Server.Watch(req, stream)
}

// serveRecycling serves hs with connections recycled as recycling says.
func serveRecycling(t *testing.T, hs healthpb.HealthServer) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.KeepaliveParams(recycling))
	healthpb.RegisterHealthServer(srv, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return srv, dial(t, lis.Addr().String())
}

// TestWatchRecycledConnection: a server that recycles its connections ends
// each Watch stream UNAVAILABLE when it closes the connection. The watch
// reopens it on the new connection and reports nothing while the service
// serves, over several recycles; NOT_SERVING on a reopened stream is still
// reported, and a server gone for good still ends the watch.
func TestWatchRecycledConnection(t *testing.T) {
	t.Parallel()
	h := countedWatch{health.NewServer(), make(chan struct{}, 100)}
	h.SetServingStatus(svc, serving)
	srv, conn := serveRecycling(t, h)
	updates, _ := watch(t, conn, svc, noPolling)

	nextStatus(t, updates, serving)
	receive(t, h.watches, "the first Watch call")
	for i := range 3 {
		select {
		case <-h.watches: // reopened on the next connection
		case u := <-updates:
			t.Fatalf("update {Status: %v, Err: %v} after %d recycled connections, want none", u.Status, u.Err, i)
		case <-time.After(within):
			t.Fatalf("no Watch call within %v of the last", within)
		}
	}
	h.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
	srv.Stop()
	if u := next(t, updates); u.Err == nil {
		t.Fatalf("update = {Status: %v}, want an Err after the server stopped", u.Status)
	}
	closed(t, updates)
}

// droppable is a listener whose accepted connections drop closes at once,
// as a server that recycles a connection or a replaced process does, with
// no schedule to wait on.
type droppable struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *droppable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// drop closes every connection accepted so far.
func (l *droppable) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// serveDroppable serves hs on a droppable listener.
func serveDroppable(t *testing.T, hs healthpb.HealthServer) (*droppable, *grpc.ClientConn) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &droppable{Listener: inner}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis, dial(t, inner.Addr().String())
}

// gate is a WatchOptions.Reopened that tells each call on entered and
// returns what the test sends on answers.
type gate struct {
	entered chan struct{}
	answers chan error
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 10), answers: make(chan error)} }

func (g *gate) reopened(ctx context.Context) error {
	g.entered <- struct{}{}
	select {
	case err := <-g.answers:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestWatchReopenedHeld: with WatchOptions.Reopened, the statuses of a
// stream reopened after its connection dropped wait for its answer. The
// first stream is not held, nor a stream once confirmed: NOT_SERVING on it
// comes at once. When the answer is an error (another process behind the
// address), the statuses that stream delivered meanwhile are never
// reported: the watch ends with the error.
func TestWatchReopenedHeld(t *testing.T) {
	t.Parallel()
	h := countedWatch{health.NewServer(), make(chan struct{}, 100)}
	h.SetServingStatus(svc, serving)
	lis, conn := serveDroppable(t, h)
	g := newGate()
	updates := healthwatch.WatchWith(t.Context(), conn, svc, noPolling, healthwatch.WatchOptions{Reopened: g.reopened})
	nextStatus(t, updates, serving)

	lis.drop()
	receive(t, g.entered, "the confirmation of the reopened stream")
	h.SetServingStatus(svc, notServing)
	g.answers <- nil
	nextStatus(t, updates, notServing)
	h.SetServingStatus(svc, serving)
	nextStatus(t, updates, serving)
	if n := len(g.entered); n != 0 {
		t.Fatalf("%d more confirmations of a confirmed stream, want none", n)
	}

	lis.drop()
	receive(t, g.entered, "the confirmation of the stream reopened again")
	h.SetServingStatus(svc, notServing)
	h.SetServingStatus(svc, serving)
	replaced := errors.New(`engine replaced: instance id "b", was "a"`)
	g.answers <- replaced
	u := next(t, updates)
	if u.Err == nil || !strings.Contains(u.Err.Error(), replaced.Error()) {
		t.Fatalf("update = {Status: %v, Err: %v}, want an Err naming %q", u.Status, u.Err, replaced)
	}
	closed(t, updates)
}
