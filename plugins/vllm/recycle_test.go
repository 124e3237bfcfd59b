package vllm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

	"github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/sdk"
)

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

// TestRecycledConnection: a vLLM server that recycles its connections
// (MaxConnectionAge with a grace) ends the health Watch every period; the
// adapter reports nothing over several recycles, and "" NOT_SERVING is
// still reported: Draining, vLLM's drain on purpose, as without a recycle.
func TestRecycledConnection(t *testing.T) {
	t.Parallel()
	conns := make(connCounter, 100)
	recycle := grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond})
	e, addr := serveMock(t, mock.Config{Model: "m", ServerOptions: []grpc.ServerOption{recycle, grpc.StatsHandler(conns)}})
	events, err := started(t, addr).WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event %v %q, want Serving", ev.Availability, ev.Reason)
	}
	for i := range 5 { // the first connection, then four recycled ones
		select {
		case <-conns:
		case ev := <-events:
			t.Fatalf("event %v %q after %d connections, want none", ev.Availability, ev.Reason, i)
		case <-time.After(within):
			t.Fatalf("no connection within %v", within)
		}
	}
	setHealth(t, e, "", "NOT_SERVING")
	select {
	case ev := <-events:
		if ev.Availability != sdk.Draining || !strings.Contains(ev.Reason, "NOT_SERVING") {
			t.Fatalf("event %v %q, want Draining", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		t.Fatal("no event after NOT_SERVING, want Draining")
	}
}
