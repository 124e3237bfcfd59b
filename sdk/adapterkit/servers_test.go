package adapterkit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// This file holds the engine the tests start: grpc-go's health server, which
// also tells its lifetime id in a header of every Check, as an engine's own
// info RPC would.

// within bounds every wait for the code under test; it only decides when a
// hung test fails.
const within = 10 * time.Second

// policy checks often, so that polled losses show quickly.
var policy = sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: time.Second, Failures: 2, RetryMax: 20 * time.Millisecond}

const (
	serving    = healthpb.HealthCheckResponse_SERVING
	notServing = healthpb.HealthCheckResponse_NOT_SERVING
	inference  = "toy.Inference"
)

// engine is a stand-in engine on loopback.
type engine struct {
	*health.Server
	id    string
	addr  string
	srv   *grpc.Server
	reads chan struct{} // a Check answered, buffered
	stop  func()
}

// port is a loopback port that outlives the engines served on it: stopping
// one leaves the port open for the next, so a client that reconnects meets
// the new engine, never a refusal. It is closed when the test ends.
type port struct {
	addr  net.Addr
	conns chan net.Conn
}

func listen(t *testing.T) *port {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &port{addr: lis.Addr(), conns: make(chan net.Conn)}
	go func() {
		defer close(p.conns)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.conns <- c
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

// listener is one engine's view of a port; closing it leaves the port open.
func (p *port) listener() net.Listener {
	return &portListener{p: p, done: make(chan struct{})}
}

type portListener struct {
	p    *port
	done chan struct{}
	once sync.Once
}

func (l *portListener) Accept() (net.Conn, error) {
	select {
	case c, ok := <-l.p.conns:
		if ok {
			return c, nil
		}
	case <-l.done:
	}
	return nil, net.ErrClosed
}

func (l *portListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *portListener) Addr() net.Addr { return l.p.addr }

// serveEngine serves an engine with lifetime id on p (a fresh port when
// nil), every service SERVING, its server built with opts; it is stopped
// when the test ends.
func serveEngine(t *testing.T, p *port, id string, opts ...grpc.ServerOption) *engine {
	t.Helper()
	return serveLoading(t, p, id, nil, opts...)
}

// serveLoading is serveEngine with the services loading NOT_SERVING from
// the start, as a process that is still loading answers.
func serveLoading(t *testing.T, p *port, id string, loading []string, opts ...grpc.ServerOption) *engine {
	t.Helper()
	if p == nil {
		p = listen(t)
	}
	lis := p.listener()
	e := &engine{Server: health.NewServer(), id: id, addr: lis.Addr().String(), srv: grpc.NewServer(opts...), reads: make(chan struct{}, 100)}
	e.SetServingStatus(inference, serving)
	for _, service := range loading {
		e.SetServingStatus(service, notServing)
	}
	healthpb.RegisterHealthServer(e.srv, e)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = e.srv.Serve(lis)
	}()
	var stopOnce sync.Once
	e.stop = func() {
		stopOnce.Do(func() {
			e.srv.Stop()
			<-served
		})
	}
	t.Cleanup(e.stop)
	return e
}

func (e *engine) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("instance-id", e.id))
	defer func() {
		select {
		case e.reads <- struct{}{}:
		default:
		}
	}()
	return e.Server.Check(ctx, req)
}

// readID reads the engine's lifetime id from the header of a Check.
func readID(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	var md metadata.MD
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
		return "", err
	}
	if v := md.Get("instance-id"); len(v) > 0 {
		return v[0], nil
	}
	return "", nil
}

// spec is an adapter over the test engine: "" liveness, toy.Inference
// readiness, the lifetime id read from Check headers when lifetime is set.
func spec(lifetime bool) adapterkit.Spec {
	s := adapterkit.Spec{
		Info:   sdk.AdapterInfo{Name: "toy"},
		Engine: "Toy",
		Signals: func(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
			return []adapterkit.Signal{
				adapterkit.HealthService(conn, "", adapterkit.Liveness),
				adapterkit.HealthService(conn, inference, adapterkit.Readiness),
			}, nil
		},
		ReadWorker: func(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
			id, err := readID(ctx, conn)
			return sdk.Worker{ServedModelName: "toy-model", InstanceID: id}, err
		},
	}
	if lifetime {
		s.LifetimeID = readID
	}
	return s
}

// start returns an adapter for s started against addr, shut down when the
// test ends.
func start(t *testing.T, s adapterkit.Spec, addr string) *adapterkit.Adapter {
	t.Helper()
	a := adapterkit.New(s)
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	if _, err := a.Start(ctx, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: policy}); err != nil {
		t.Fatalf("Start(%s) = %v, want nil", addr, err)
	}
	return a
}

// receive waits for a value from ch.
func receive[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
	}
}
