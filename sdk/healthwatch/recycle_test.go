package healthwatch_test

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
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
