package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
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

// TestReusedAddressQuarantined: a worker killed without withdrawing leaves
// its record (a long --check-ttl), and another worker, of another id and
// model, takes its address (kubernetes #109414). Requests for the first
// one's model all succeed on the other worker of that model: the worker
// now at the address refuses the one meant for the old id (WORKER_MISMATCH)
// once, the router logs it once at WARN with both ids and sends that entry
// nothing more while discovery lists it unchanged.
func TestReusedAddressQuarantined(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir, svc := t.TempDir(), "llm"
	reg := fileRegistry{dir, svc}
	start := func(id, listen string, extra ...string) *vigil {
		m := startMock(t, e, harness.MockOpts{})
		v := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC, workerID: id, listen: listen, extra: extra}))
		v.waitLine("worker registered", 30*time.Second)
		return v
	}
	old := start("old", "", "--check-ttl", "60s")
	live := start("live", "")
	r := &router{GRPC: addr(freePort(t)), HTTP: addr(freePort(t))}
	r.proc = startProc(t, "vigil route", vigilBin, "route", "--discovery", "file", "--registry-dir", dir,
		"--service-name", svc, "--listen", r.GRPC, "--http-listen", r.HTTP)
	for _, v := range []*vigil{old, live} {
		r.waitLine("worker joined: addr="+v.Listen, 30*time.Second)
	}
	old.signal(syscall.SIGKILL)
	old.wait(exitBound)
	metrics := addr(freePort(t))
	start("new", old.Listen, "--served-model-name", "other", "--metrics-listen", metrics)

	rc := workerClient(t, r.GRPC)
	send := func(i int) {
		t.Helper()
		req := tokenPrompt(fmt.Sprint("r", i), 2, 1)
		req.Model = e.servedModel
		if got := generate(context.Background(), rc, req, nil); got.err != nil || len(got.tokens) != 2 {
			t.Fatalf("request %d for %s: %d tokens, err %v; want 2 from the live worker", i, e.servedModel, len(got.tokens), got.err)
		}
	}
	const warning = "answers as another worker"
	// The router reconnects to the address, and retries the stale entry
	// as its cost decays: no event to await but the warning.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; !strings.Contains(r.output(), warning); i++ {
		if time.Now().After(deadline) {
			t.Fatal("the router never found the stale entry's address held by another worker")
		}
		send(i)
		time.Sleep(20 * time.Millisecond)
	}
	refused := `vigil_worker_requests_total{outcome="refused"}`
	before := scrape(t, metrics)[refused]
	for i := range 50 {
		send(1000 + i)
	}
	if after := scrape(t, metrics)[refused]; after != before || before != 1 {
		t.Errorf("the worker at the reused address refused %v requests, then %v after 50 more; want 1 and 1", before, after)
	}
	if n := strings.Count(r.output(), warning); n != 1 {
		t.Errorf("the router warned %d times, want once", n)
	}
	line := r.waitLine(warning, time.Second)
	if !strings.Contains(line, "worker_id=old") || !strings.Contains(line, "answering_worker_id=new") {
		t.Errorf("warning %q, want it to name worker_id=old and answering_worker_id=new", line)
	}
}
