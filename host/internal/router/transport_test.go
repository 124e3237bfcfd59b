package router

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// TestTransportFailuresReachNoAnswer: whatever breaks between the router
// and a worker (the connection refused, closed at once (EOF), a TLS
// handshake failing, the connection reset mid-stream, closed after a
// GOAWAY, or frozen until the keepalive ping times out), no HTTP or gRPC
// answer of the router carries gRPC's transport text: clients read the
// router's own words (for a TLS failure, which side refused what), its
// log keeps gRPC's.
func TestTransportFailuresReachNoAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// worker returns the worker's registration, the pool's
		// configuration, and what breaks the connection once the worker
		// has sent its first chunk (nil: it fails before).
		worker func(t *testing.T) (discovery.Registration, PoolConfig, func())
	}{
		{"connection refused", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			return registration(closedPort(t)), PoolConfig{}, nil
		}},
		{"EOF", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			return registration(closingListener(t)), PoolConfig{}, nil
		}},
		{"TLS handshake failure", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			w := startHoldingWorker(t)
			return registration(w.addr), PoolConfig{Credentials: credentials.NewTLS(&tls.Config{ServerName: "worker"})}, nil
		}},
		{"reset mid-stream", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			w := startHoldingWorker(t)
			r := startRelay(t, w.addr)
			return registration(r.addr()), PoolConfig{}, func() { <-w.sent; r.reset() }
		}},
		{"GOAWAY, then closed", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			w := startHoldingWorker(t, grpc.KeepaliveParams(keepalive.ServerParameters{
				MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond}))
			return registration(w.addr), PoolConfig{}, func() { <-w.sent }
		}},
		{"keepalive timeout", func(t *testing.T) (discovery.Registration, PoolConfig, func()) {
			if testing.Short() {
				t.Skip("waits for the router's keepalive (15 s)")
			}
			w := startHoldingWorker(t)
			r := startRelay(t, w.addr)
			return registration(r.addr()), PoolConfig{}, func() { <-w.sent; r.freeze() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, api := range []string{"grpc", "http", "http stream"} {
				t.Run(api, func(t *testing.T) {
					t.Parallel()
					ep, cfg, brk := tc.worker(t)
					r := startRouterAt(t, cfg, []discovery.Registration{ep}, withTimeout(time.Minute))
					if brk != nil {
						go brk()
					}
					answer := r.answer(t, api)
					for _, s := range transportText {
						if strings.Contains(answer, s) {
							t.Errorf("the router's answer holds gRPC's transport text %q:\n%s", s, answer)
						}
					}
					want := unreachable
					if strings.HasPrefix(tc.name, "TLS") {
						// Named by its own words (TestTLSFailuresNamed).
						want = "the worker does not speak TLS"
					}
					if !strings.Contains(answer, want) {
						t.Errorf("answer %q, want it to say %q", answer, want)
					}
				})
			}
		})
	}
}

// answer makes one request of the router through api ("grpc", "http" or
// "http stream") and returns all the client read of its failure.
func (r *testRouter) answer(t *testing.T, api string) string {
	t.Helper()
	switch api {
	case "grpc":
		g := r.generate(t.Context(), "m", "hi")
		if g.err == nil {
			t.Fatalf("request succeeded: %+v", g)
		}
		// The client's own "rpc error: code = ... desc =" framing aside:
		// the router's status message, and a final's description.
		return g.text + " | " + g.final.GetDescription() + " | " + status.Convert(g.err).Message()
	case "http stream":
		_, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"hi","stream":true}`)
		return body
	default:
		code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"hi"}`)
		if code < http.StatusInternalServerError {
			t.Errorf("status %d, want 5xx:\n%s", code, body)
		}
		return body
	}
}

func registration(addr string) discovery.Registration {
	host, port, _ := net.SplitHostPort(addr)
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	return discovery.Registration{WorkerID: "w", Address: host, Port: p, Model: "m", Engine: "fake", InstanceID: "w-1"}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// closingListener is a loopback address that accepts connections and
// closes them at once, until the test ends.
func closingListener(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return lis.Addr().String()
}

// holdingWorker is a worker that sends one chunk of each request and then
// holds it until the client goes away; sent is closed after the first
// chunk.
type holdingWorker struct {
	addr string
	sent chan struct{}
	once sync.Once
	workerv1.UnimplementedWorkerServer
}

func (w *holdingWorker) Generate(_ *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: &workerv1.Chunk{Text: "hello", TokenIds: []uint32{1}}}})
	if err != nil {
		return err
	}
	w.once.Do(func() { close(w.sent) })
	<-stream.Context().Done()
	return status.FromContextError(stream.Context().Err()).Err()
}

func startHoldingWorker(t *testing.T, opts ...grpc.ServerOption) *holdingWorker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &holdingWorker{addr: lis.Addr().String(), sent: make(chan struct{})}
	s := grpc.NewServer(opts...)
	workerv1.RegisterWorkerServer(s, w)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return w
}

// relay forwards TCP connections to a target until reset (every
// connection closed with RST) or frozen (nothing forwarded any more, the
// connections left open, as a frozen peer or a black-holed path leaves
// them).
type relay struct {
	lis        net.Listener
	target     string
	frozen     chan struct{}
	freezeOnce sync.Once
	done       chan struct{}
	wg         sync.WaitGroup

	mu    sync.Mutex
	conns []*net.TCPConn
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{lis: lis, target: target, frozen: make(chan struct{}), done: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() {
		close(r.done)
		lis.Close()
		r.reset()
		r.wg.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.lis.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.lis.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c.(*net.TCPConn), up.(*net.TCPConn))
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(up, c)
		go r.pipe(c, up)
	}
}

// pipe copies src to dst until either fails; once frozen, it reads and
// drops.
func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-r.frozen:
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// reset closes every connection with RST (SO_LINGER 0).
func (r *relay) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.SetLinger(0)
		c.Close()
	}
}

func (r *relay) freeze() { r.freezeOnce.Do(func() { close(r.frozen) }) }
