package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// Another live vigil holds the worker's registration (both were given one
// worker id): this one registers nothing over it, stops admitting, drains,
// shuts the adapter down and ends with a configuration error naming the
// other and --worker-id; the other's record stays.
func TestLifecycleDuplicateWorkerID(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	ep := &fakeEndpoint{}
	engine := newFakeEngine()
	h := startHarnessWith(t, engine, ep, func(c *Config) { c.Logger = logs.logger() })

	// The other vigil: the same worker id, another address, renewing.
	other := discovery.Registration{Service: "llm", WorkerID: "w1", Engine: "fake", Address: "127.0.0.9", Port: 9, Owner: "other"}
	reg := file.New(h.dir, time.Minute)
	if err := reg.Register(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for ctx.Err() == nil {
			if err := reg.Heartbeat(ctx, other); err != nil {
				t.Errorf("the other's heartbeat: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	h.send(sdk.Serving)
	h.ended(outcome.ErrConfig)
	cancel()
	<-renewed
	if recs := h.holds(); len(recs) != 1 || recs[0].Owner != "other" || recs[0].Address != "127.0.0.9" {
		t.Errorf("registry holds %+v, want the other's record alone", recs)
	}
	if ep.Serving() {
		t.Error("endpoint still admitting")
	}
	select {
	case <-engine.shuttingDown:
	default:
		t.Error("adapter not shut down")
	}
	line := logs.line("duplicate worker id")
	for _, want := range []string{"[ERROR]", "--worker-id", "127.0.0.9:9", "another live vigil"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q does not hold %q", line, want)
		}
	}
}
