package healthwatch_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// This file holds the health servers the tests watch: grpc-go's own, and
// small handlers for the ways engine servers answer Watch differently.

// within bounds every wait for something the code under test should do; it
// is generous because it only decides when a hung test fails.
const within = 10 * time.Second

// serve serves hs on a loopback listener and returns the server and a
// connection to it; both are closed when the test ends.
func serve(t *testing.T, hs healthpb.HealthServer) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	return srv, dial(t, lis.Addr().String())
}

// dial returns a connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		healthwatch.ConnectParams(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// watch starts healthwatch.Watch and, when the test ends, cancels it and
// checks that the channel closes.
func watch(t *testing.T, conn *grpc.ClientConn, service string, opts sdk.HealthPolicy) (<-chan healthwatch.Update, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	updates := healthwatch.Watch(ctx, conn, service, opts)
	t.Cleanup(func() {
		cancel()
		timeout := time.After(within)
		for {
			select {
			case _, ok := <-updates:
				if !ok {
					return
				}
			case <-timeout:
				t.Errorf("watch channel still open %v after cancel", within)
				return
			}
		}
	})
	return updates, cancel
}

// next returns the next update, failing the test if none comes in time or
// the channel is closed.
func next(t *testing.T, updates <-chan healthwatch.Update) healthwatch.Update {
	t.Helper()
	select {
	case u, ok := <-updates:
		if !ok {
			t.Fatal("watch channel closed, want another update")
		}
		return u
	case <-time.After(within):
		t.Fatalf("no update within %v", within)
	}
	panic("unreachable")
}

// nextStatus returns the next update and checks it carries want and no error.
func nextStatus(t *testing.T, updates <-chan healthwatch.Update, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	u := next(t, updates)
	if u.Err != nil || u.Status != want {
		t.Fatalf("update = {Status: %v, Err: %v}, want {Status: %v, Err: nil}", u.Status, u.Err, want)
	}
	if u.Time.IsZero() {
		t.Errorf("update %v has a zero Time, want the time of the observation", u.Status)
	}
}

// receive waits for a signal from ch, failing the test if none comes in time.
func receive[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
	}
}

// closed waits for the channel to close, failing on any further update.
func closed(t *testing.T, updates <-chan healthwatch.Update) {
	t.Helper()
	select {
	case u, ok := <-updates:
		if ok {
			t.Fatalf("update %+v after the final one, want the channel closed", u)
		}
	case <-time.After(within):
		t.Fatalf("watch channel still open after %v", within)
	}
}

// onceWatch sends the current status, waits until end is closed (at once if
// end is nil), then ends the stream with OK; Check works as usual. Older
// SGLang schedulers behave like this. watchEnded is closed when Watch
// returns; checksAfter counts Checks that arrive after that.
type onceWatch struct {
	*health.Server
	end         chan struct{}
	watchEnded  chan struct{}
	endOnce     sync.Once
	ended       atomic.Bool
	checksAfter chan struct{}
}

func newOnceWatch(end chan struct{}) *onceWatch {
	return &onceWatch{Server: health.NewServer(), end: end, watchEnded: make(chan struct{}), checksAfter: make(chan struct{}, 1000)}
}

func (h *onceWatch) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	defer h.endOnce.Do(func() {
		h.ended.Store(true)
		close(h.watchEnded)
	})
	resp, err := h.Server.Check(stream.Context(), req)
	if err != nil {
		return err
	}
	if err := stream.Send(resp); err != nil {
		return err
	}
	if h.end != nil {
		select {
		case <-h.end:
		case <-stream.Context().Done():
		}
	}
	return nil
}

func (h *onceWatch) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.ended.Load() {
		select {
		case h.checksAfter <- struct{}{}:
		default:
		}
	}
	return h.Server.Check(ctx, req)
}

// silentWatch ends every Watch at once with OK and no status.
type silentWatch struct{ *health.Server }

func (silentWatch) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return nil
}

// failingWatch answers Watch with an error status; Check works.
type failingWatch struct {
	*health.Server
	code codes.Code
}

func (h failingWatch) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return status.Errorf(h.code, "watch answers %v", h.code)
}

// frozenHealth stands in for a stopped engine process whose TCP connection
// stays open: Check and Watch never answer until the caller gives up.
type frozenHealth struct {
	healthpb.UnimplementedHealthServer
}

func (frozenHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (frozenHealth) Watch(_ *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	<-stream.Context().Done()
	return status.FromContextError(stream.Context().Err()).Err()
}

// slowCheck answers its first Check after delay; later Checks answer at
// once. Each answered Check is signalled on answered.
type slowCheck struct {
	*health.Server
	delay    time.Duration
	calls    atomic.Int32
	answered chan struct{}
}

func (h *slowCheck) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) == 1 {
		// The slowness is what is under test, not a synchronisation.
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	defer func() {
		select {
		case h.answered <- struct{}{}:
		default:
		}
	}()
	return h.Server.Check(ctx, req)
}
