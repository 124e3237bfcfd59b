package enginemock

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// recycleOptions are the server options of --max-connection-age: none for
// 0.
func recycleOptions(age, grace time.Duration) []grpc.ServerOption {
	if age <= 0 {
		return nil
	}
	return []grpc.ServerOption{grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: age, MaxConnectionAgeGrace: grace})}
}

// listenGRPC listens on addr, with SO_REUSEPORT when reuse is set (see
// setReusePort).
func listenGRPC(ctx context.Context, addr string, reuse bool) (net.Listener, error) {
	var lc net.ListenConfig
	if reuse {
		lc.Control = setReusePort
	}
	return lc.Listen(ctx, "tcp", addr)
}
