package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// tcpProxy forwards every connection to its backend, which moveTo changes:
// an engine address that leads to another engine from one connection to
// the next, as a port-forward or a load balancer in front of a replaced
// engine does.
type tcpProxy struct {
	*harness.Proxy
	addr string
}

// startTCPProxy listens on a fresh loopback port and forwards to backend
// until the test ends.
func startTCPProxy(t *testing.T, backend string) *tcpProxy {
	t.Helper()
	p, err := harness.StartProxy(backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &tcpProxy{Proxy: p, addr: p.Addr}
}

// moveTo sends new connections to backend and closes the open ones: their
// clients connect again, and reach backend.
func (p *tcpProxy) moveTo(backend string) { p.MoveTo(backend) }

// consulGate stands between vigil and the Consul agent. It forwards every
// request, the agent's writes (register, check update, deregister) one at
// a time and in the order they arrive, and holds the first registration
// until release: a registration in flight for as long as the test needs.
// A held registration reaches the agent even if vigil gave up waiting
// for it, as a request already sent may.
type consulGate struct {
	agent *consulAgent  // the gate as vigil's agent; its Client is the real agent's
	held  chan struct{} // closed when the first registration arrives

	release  chan struct{}
	releaseO sync.Once
	upstream string
	client   *http.Client
	writes   sync.Mutex // one agent write at a time, in order

	mu       sync.Mutex
	ops      []string // "register 200", "deregister 200", ... as forwarded
	heldOnce bool
}

func startConsulGate(t *testing.T, c *consulAgent) *consulGate {
	t.Helper()
	g := &consulGate{held: make(chan struct{}), release: make(chan struct{}), upstream: c.Addr,
		client: &http.Client{Timeout: 30 * time.Second}}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		g.releaseRegistration() // a test that failed early must not hang Close
		srv.Close()
		g.client.CloseIdleConnections()
	})
	g.agent = &consulAgent{Consul: &harness.Consul{Proc: c.Proc, Addr: strings.TrimPrefix(srv.URL, "http://"), Client: c.Client}, t: t}
	return g
}

func (g *consulGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := agentWrite(r.URL.Path)
	if op != "" {
		g.writes.Lock()
		defer g.writes.Unlock()
	}
	if op == "register" {
		g.mu.Lock()
		first := !g.heldOnce
		g.heldOnce = true
		g.mu.Unlock()
		if first {
			close(g.held)
			<-g.release
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	// Not the client's context: a request that reached the gate reaches
	// the agent.
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, "http://"+g.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := g.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if op != "" {
		g.mu.Lock()
		g.ops = append(g.ops, op+" "+resp.Status)
		g.mu.Unlock()
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// agentWrite names the agent write at path, or "".
func agentWrite(path string) string {
	switch {
	case path == "/v1/agent/service/register":
		return "register"
	case strings.HasPrefix(path, "/v1/agent/service/deregister/"):
		return "deregister"
	case strings.HasPrefix(path, "/v1/agent/check/"):
		return "check update"
	}
	return ""
}

// releaseRegistration lets the held registration on to the agent.
func (g *consulGate) releaseRegistration() { g.releaseO.Do(func() { close(g.release) }) }

// forwarded returns the agent writes forwarded so far, in order, with the
// agent's answers.
func (g *consulGate) forwarded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.ops...)
}

// neverPassing watches service's passing list from now on. done is closed
// if an instance of service passes (or the watch fails); stop ends the
// watch and fails the test if an instance of service was passing at any
// answer it got.
func neverPassing(t *testing.T, c *consulAgent, service string) (done <-chan struct{}, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	obs := c.Observe(ctx, service, func(e []*api.ServiceEntry) bool { return len(e) > 0 })
	return obs.Done(), func() {
		t.Helper()
		cancel()
		if at, err := obs.Wait(); err == nil {
			t.Errorf("worker passing in Consul at %s, while the engine's liveness signal reported failure", at.Format(time.StampMicro))
		}
	}
}
