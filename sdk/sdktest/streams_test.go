package sdktest

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"
)

// holdService has one server stream, Hold, which ends only when its
// client does.
var holdService = grpc.ServiceDesc{
	ServiceName: "sdktest.Held",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Hold",
		ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			<-stream.Context().Done()
			return stream.Context().Err()
		},
	}},
}

// TestProxyFollowsStreams: the kit's proxy sees which engine streams
// opened since a mark are still open, and sees one end when its client
// resets it; health checks and calls before the mark do not count.
func TestProxyFollowsStreams(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&holdService, struct{}{})
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	p := newProxy(testingT{t}, lis.Addr().String())
	conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := func() {
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health Check through the proxy: %v", err)
		}
	}
	check() // before the mark
	mark := p.streams.mark()
	if opened, open := p.streams.awaitEnded(mark, 0); opened != 0 || open != nil {
		t.Errorf("awaitEnded() with no stream since the mark = %d, %q; want 0, none", opened, open)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := conn.NewStream(ctx, &holdService.Streams[0], "/sdktest.Held/Hold")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	check() // ends at once, and is not counted
	if opened, open := p.streams.awaitEnded(mark, 200*time.Millisecond); opened != 1 || len(open) != 1 || open[0] != "/sdktest.Held/Hold" {
		t.Errorf("awaitEnded() with Hold open = %d, %q; want 1, [/sdktest.Held/Hold]", opened, open)
	}
	cancel() // the client's RST_STREAM
	if opened, open := p.streams.awaitEnded(mark, 5*time.Second); opened != 1 || open != nil {
		t.Errorf("awaitEnded() after the client reset Hold = %d, %q; want 1, none open", opened, open)
	}
}
