package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulBin finds the Consul agent: VIGIL_CONSUL_BIN, else the one
// `make consul` builds into .bin at the repository root.
func consulBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("VIGIL_CONSUL_BIN"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", ".bin", "consul")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no Consul agent at %s: run `make consul` or set VIGIL_CONSUL_BIN", p)
	}
	return p
}

// consulAgent is a dev-mode Consul agent on loopback ports of its own.
type consulAgent struct {
	t      testing.TB
	bin    string
	args   []string
	proc   *proc
	Addr   string
	Client *api.Client
}

// startConsul starts a dev agent and waits until it has a leader.
func startConsul(t testing.TB) *consulAgent {
	t.Helper()
	httpPort := freePort(t)
	a := &consulAgent{t: t, bin: consulBin(t), Addr: addr(httpPort)}
	a.args = []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", fmt.Sprintf("e2e-%d", httpPort),
		"-http-port", fmt.Sprint(httpPort), "-dns-port", "-1", "-grpc-port", "-1",
		"-serf-lan-port", fmt.Sprint(freePort(t)), "-serf-wan-port", fmt.Sprint(freePort(t)),
		"-server-port", fmt.Sprint(freePort(t)),
		"-hcl", "ports { grpc_tls = -1 }", "-log-level", "warn"}
	client, err := api.NewClient(&api.Config{Address: a.Addr})
	if err != nil {
		t.Fatal(err)
	}
	a.Client = client
	a.start()
	return a
}

func (a *consulAgent) start() {
	a.t.Helper()
	a.proc = startProc(a.t, "consul", a.bin, a.args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Polling is the only way to learn of the leader election.
		leader, err := a.Client.Status().Leader()
		if err == nil && leader != "" {
			return
		}
		if a.proc.exited() || time.Now().After(deadline) {
			a.t.Fatalf("consul agent did not elect a leader (last error: %v):\n%s", err, a.proc.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restart kills the agent and starts it again on the same ports; a dev
// agent keeps no state, so all registrations are gone.
func (a *consulAgent) restart() {
	a.t.Helper()
	_ = a.proc.cmd.Process.Kill()
	a.proc.wait(10 * time.Second)
	a.start()
}

func (a *consulAgent) env() []string { return []string{"CONSUL_HTTP_ADDR=" + a.Addr} }

var (
	sharedConsulOnce sync.Once
	sharedConsul     *consulAgent
	sharedConsulStop func()
)

// consulFor returns the agent shared by the tests of this package; tests use
// unique service names because a critical service lingers for a minute.
func consulFor(t *testing.T) *consulAgent {
	t.Helper()
	sharedConsulOnce.Do(func() {
		tb := &longLivedTB{TB: t}
		sharedConsul = startConsul(tb)
		sharedConsulStop = tb.cleanup
	})
	if sharedConsul == nil {
		t.Fatal("shared consul agent failed to start")
	}
	return sharedConsul
}

func stopSharedConsul() {
	if sharedConsulStop != nil {
		sharedConsulStop()
	}
}

// longLivedTB lets the shared agent outlive the test that started it: its
// cleanups run in TestMain.
type longLivedTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (l *longLivedTB) Cleanup(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleanups = append(l.cleanups, f)
}

func (l *longLivedTB) cleanup() {
	for i := len(l.cleanups) - 1; i >= 0; i-- {
		l.cleanups[i]()
	}
}

var serviceSeq struct {
	sync.Mutex
	n int
}

// uniqueService returns a service name no other test uses.
func uniqueService(t *testing.T) string {
	serviceSeq.Lock()
	defer serviceSeq.Unlock()
	serviceSeq.n++
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), serviceSeq.n)
}

// passing waits, with blocking queries, until the passing instances of
// service satisfy cond, and returns them with the time it saw them.
func (a *consulAgent) passing(t *testing.T, service string, timeout time.Duration, cond func([]*api.ServiceEntry) bool) ([]*api.ServiceEntry, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var index uint64
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: timeout}).WithContext(ctx)
		entries, meta, err := a.Client.Health().Service(service, "", true, q)
		now := time.Now()
		if err == nil {
			if cond(entries) {
				return entries, now
			}
			index = meta.LastIndex
			continue
		}
		if ctx.Err() != nil {
			t.Fatalf("passing instances of %s did not reach the expected state within %s (last: %d entries)", service, timeout, len(entries))
		}
		if errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		// The agent may be restarting; ask again without an index.
		index = 0
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func count(n int) func([]*api.ServiceEntry) bool {
	return func(e []*api.ServiceEntry) bool { return len(e) == n }
}

// catalogHas reports whether the agent holds any instance of service,
// passing or not.
func (a *consulAgent) catalogHas(t *testing.T, service string) bool {
	t.Helper()
	svcs, err := a.Client.Agent().ServicesWithFilter(fmt.Sprintf("Service == %q", service))
	if err != nil {
		t.Fatalf("listing agent services: %v", err)
	}
	return len(svcs) > 0
}
