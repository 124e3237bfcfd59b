package router

import (
	"testing"
	"time"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// A worker ends a connection pinged more often than it permits (GOAWAY
// too_many_pings), failing every stream on it: the router pings no more
// often than that.
func TestWorkerKeepaliveWithinWorkersPolicy(t *testing.T) {
	t.Parallel()
	if workerKeepalive.Time < workerapi.KeepaliveMinTime {
		t.Errorf("router pings workers every %v, more often than they permit (%v)", workerKeepalive.Time, workerapi.KeepaliveMinTime)
	}
}

// A client that pings every 10 s (grpc-go's shortest interval) holds a
// stream through the router for a minute of prefill, no data flowing: the
// router permits its pings (no GOAWAY too_many_pings, which gRPC's default
// policy sends at the third), and the stream completes once the engine
// answers.
func TestClientKeepaliveThroughLongPrefill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds a stream for 60s")
	}
	w := startWorker(t, "a", "m", grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: workerapi.KeepaliveMinTime}))
	release := make(chan struct{})
	w.set(func(w *fakeWorker) { w.wait = release })
	r := startRouter(t, []*fakeWorker{w})
	cc, err := grpc.NewClient(r.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := &testRouter{client: workerv1.NewWorkerClient(cc)}
	result := make(chan generated, 1)
	go func() { result <- client.generate(t.Context(), "m", "a long prompt") }()
	<-w.holding
	select {
	case g := <-result:
		t.Fatalf("the stream ended while the engine held it, before 60s: text %q, err %v", g.text, g.err)
	case <-time.After(60 * time.Second):
	}
	close(release)
	g := <-result
	if g.err != nil || g.text != "hello world" || g.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_STOP {
		t.Errorf("after 60s held: text %q, final %v, err %v; want hello world, STOP, no error", g.text, g.final, g.err)
	}
}
