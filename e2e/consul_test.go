package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// consulBin finds the Consul agent: VIGIL_CONSUL_BIN, else the one
// `make consul` builds into .bin at the repository root.
func consulBin(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p, err := harness.ConsulBin(filepath.Join(filepath.Dir(file), ".."))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// consulAgent is a dev-mode Consul agent on loopback ports of its own.
type consulAgent struct {
	*harness.Consul
	t testing.TB
}

// startConsul starts a dev agent and waits until it has a leader.
func startConsul(t testing.TB) *consulAgent {
	t.Helper()
	c, err := harness.StartConsul(starter{t}, consulBin(t), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	return &consulAgent{Consul: c, t: t}
}

// restart kills the agent and starts it again on the same ports; a dev
// agent keeps no state, so all registrations are gone.
func (a *consulAgent) restart() {
	a.t.Helper()
	if err := a.Restart(); err != nil {
		a.t.Fatal(err)
	}
}

func (a *consulAgent) env() []string { return a.Env() }

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
// cleanups run in TestMain, after that test has ended, where they must not
// log to it (testing panics) nor take its failure for the agent's.
type longLivedTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (l *longLivedTB) Failed() bool { return false }

func (l *longLivedTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
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

// uniqueService returns a service name no other test uses, made of the
// test's name in the characters vigil takes in one.
func uniqueService(t *testing.T) string {
	serviceSeq.Lock()
	defer serviceSeq.Unlock()
	serviceSeq.n++
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), serviceSeq.n)
}

// passing waits, with blocking queries, until the passing instances of
// service satisfy cond, and returns them with the time it saw them.
func (a *consulAgent) passing(t *testing.T, service string, timeout time.Duration, cond func([]*api.ServiceEntry) bool) ([]*api.ServiceEntry, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	entries, at, err := a.Passing(ctx, service, cond)
	if err != nil {
		t.Fatalf("passing instances of %s did not reach the expected state within %s: %v", service, timeout, err)
	}
	return entries, at
}

func count(n int) func([]*api.ServiceEntry) bool { return harness.Count(n) }

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
