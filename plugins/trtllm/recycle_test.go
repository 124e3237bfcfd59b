package trtllm_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/sdk"
)

// TestRecycledConnection: TensorRT-LLM has no lifetime id, so the
// connection is all vigil can follow between polls. One the server
// recycles (MaxConnectionAge: GOAWAY first, then closed after a grace) is
// reconnected and carries on, with no event over several periods; an
// unhealthy engine is still Lost. One closed without GOAWAY (the engine
// killed) stays a loss at once (e2e TestEngineLost, trtllm's restart case).
func TestRecycledConnection(t *testing.T) {
	t.Parallel()
	recycle := grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond})
	e, addr := serveMock(t, "", mock.Config{ServerOptions: []grpc.ServerOption{recycle}})
	events, err := started(t, addr).WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event %v %q, want Serving", ev.Availability, ev.Reason)
	}
	// Watching over the periods is the assertion: each recycled connection
	// was taken for a loss before.
	select {
	case ev := <-events:
		t.Fatalf("event %v %q while the engine recycled its connections, want none", ev.Availability, ev.Reason)
	case <-time.After(5 * 600 * time.Millisecond):
	}
	post(t, e, "/health", `{"status": "NOT_SERVING"}`)
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost {
			t.Fatalf("event %v %q, want Lost", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		t.Fatal("no event after the engine turned unhealthy, want Lost")
	}
}
