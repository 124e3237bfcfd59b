package sglang_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/sdk"
)

// TestRecycledConnection: an SGLang server on the runtime API that
// recycles its connections (MaxConnectionAge with a grace) ends the
// WatchEngineState stream every period; the adapter reopens it and reports
// nothing over several recycles, and an unhealthy engine is still Lost.
func TestRecycledConnection(t *testing.T) {
	t.Parallel()
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			recycledConnection(t, layout)
		})
	}
}

func recycledConnection(t *testing.T, layout mock.Layout) {
	recycle := grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 300 * time.Millisecond, MaxConnectionAgeGrace: 300 * time.Millisecond})
	e, addr := serveMock(t, mock.Config{ServerOptions: []grpc.ServerOption{recycle}, Layout: layout})
	events, err := started(t, addr, nil).WatchAvailability(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Availability != sdk.Serving {
		t.Fatalf("first event %v %q, want Serving", ev.Availability, ev.Reason)
	}
	// Watching over the periods is the assertion: each one ends the state
	// stream, which was taken for a loss before.
	quiet := time.After(5 * 600 * time.Millisecond)
	select {
	case ev := <-events:
		t.Fatalf("event %v %q while the engine recycled its connections, want none", ev.Availability, ev.Reason)
	case <-quiet:
	}
	post(t, e, "/health", `{"status": "NOT_SERVING"}`)
	select {
	case ev := <-events:
		if ev.Availability != sdk.Lost || !strings.Contains(ev.Reason, "healthy") {
			t.Fatalf("event %v %q, want Lost", ev.Availability, ev.Reason)
		}
	case <-time.After(within):
		t.Fatal("no event after NOT_SERVING, want Lost")
	}
}
