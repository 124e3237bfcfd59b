package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// TestFastFailingWorkerGetsItsShare: of three workers behind vigil route's
// default balance, one whose engine fails every request at once (the
// mock's /fail at token 0, every stream) gets no more than its share of 300 requests
// (ingress-nginx #5540): its failures count against its cost, not as a
// fast first token. The router retries its requests on the others, so
// every client succeeds.
func TestFastFailingWorkerGetsItsShare(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	var ws []consulWorker
	for range 3 {
		// Decode steps 5 ms apart: a first token takes up to a step, as
		// an engine's does; the injected failure comes at once.
		m := startMock(t, e, harness.MockOpts{Extra: []string{"--step-interval", "5ms"}})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
		v.waitLine("worker registered", 30*time.Second)
		ws = append(ws, consulWorker{m, v})
	}
	c.passing(t, svc, 30*time.Second, count(3))
	ws[0].m.post(t, "/fail", map[string]any{"at_token": 0, "code": "INTERNAL", "every": true})
	r := startRouter(t, c, svc, 1)
	rc := workerClient(t, r.GRPC)
	base := requestsTotal(t, ws[0].m)
	const requests = 300
	for i := range requests {
		if got := generate(context.Background(), rc, tokenPrompt(fmt.Sprint("r", i), 2, 1), nil); got.err != nil || len(got.tokens) != 2 {
			t.Fatalf("request %d through the router: %d tokens, err %v; want 2, retried past the failing worker", i, len(got.tokens), got.err)
		}
	}
	n := requestsTotal(t, ws[0].m) - base
	t.Logf("the failing worker's engine got %d of %d requests", n, requests)
	if n > requests/3 {
		t.Errorf("the failing worker's engine got %d of %d requests, want at most its share, %d", n, requests, requests/3)
	}
}
