package adapterkit

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
)

// connTracker dials the engine connection's TCP connections. It can drop
// the newest, so that gRPC's next call opens another: with two engine
// processes on one port (SO_REUSEPORT) the kernel spreads new connections
// between them, and a new connection is how to reach the other one. And it
// tells whether the newest was closed by the engine's side without GOAWAY
// (a read failed before gRPC closed it): an engine that recycles its
// connections (MaxConnectionAge, a proxy's connection limit) sends GOAWAY
// first, and gRPC takes the connection out of service while it still
// works; an engine that went away just closes it. For an engine without a
// lifetime id that is the only difference vigil can see.
type connTracker struct {
	mu     sync.Mutex
	latest *trackedConn
}

// dialOption dials through t.
func (t *connTracker) dialOption() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c}
		t.mu.Lock()
		t.latest = tc
		t.mu.Unlock()
		return tc, nil
	})
}

// drop closes the newest connection; gRPC reconnects on the next call.
func (t *connTracker) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latest != nil {
		_ = t.latest.Close()
		t.latest = nil
	}
}

// peerClosed reports whether the newest connection was closed by the
// engine's side before gRPC closed it.
func (t *connTracker) peerClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest != nil && t.latest.peerClosed.Load()
}

type trackedConn struct {
	net.Conn
	closed     atomic.Bool // by gRPC (or drop)
	peerClosed atomic.Bool // a read failed before that
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && !c.closed.Load() {
		c.peerClosed.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}
