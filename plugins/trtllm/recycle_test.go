package trtllm_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/sdk"
)

// TestRecycledConnection: TensorRT-LLM has no lifetime id, so after a
// connection closes vigil cannot tell the same process from a restarted
// one, and a connection the server recycles (MaxConnectionAge) is taken
// for a loss, naming why: the limit docs/engines.md states.
func TestRecycledConnection(t *testing.T) {
	t.Parallel()
	recycle := grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond})
	_, addr := serveMock(t, "", mock.Config{ServerOptions: []grpc.ServerOption{recycle}})
	events, err := started(t, addr).WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event %v %q, want Serving", ev.Availability, ev.Reason)
	}
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost || !strings.Contains(ev.Reason, "no lifetime id") {
			t.Fatalf("event %v %q, want Lost naming the missing lifetime id", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		t.Fatal("no event after the connection was recycled, want Lost")
	}
}
