package adapterkit

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
)

// connTracker dials the engine connection's TCP connections and can drop
// the newest, so that gRPC's next call opens another. With two engine
// processes on one port (SO_REUSEPORT) the kernel spreads new connections
// between them, and a new connection is how to reach the other one.
type connTracker struct {
	mu     sync.Mutex
	latest net.Conn
}

// dialOption dials through t.
func (t *connTracker) dialOption() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.latest = c
		t.mu.Unlock()
		return c, nil
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
