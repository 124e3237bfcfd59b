package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// routerLoad sends requests through a router, two at a time and each
// stream a few a second, until stopped, and keeps what failed.
type routerLoad struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	ok     int
	failed []string
}

func startRouterLoad(t *testing.T, target string) *routerLoad {
	t.Helper()
	wc := workerClient(t, target)
	ctx, cancel := context.WithCancel(context.Background())
	l := &routerLoad{cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(50 * time.Millisecond)
			defer pace.Stop()
			for i := 0; ; i++ {
				rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
				got := generate(rctx, wc, tokenPrompt(fmt.Sprintf("load-%d-%d", g, i), 2, 1), nil)
				rcancel()
				if ctx.Err() != nil {
					return // stopped: the request cut short is not the router's
				}
				l.mu.Lock()
				if got.err != nil || len(got.tokens) != 2 {
					l.failed = append(l.failed, fmt.Sprintf("%s: %d tokens, %v", time.Now().Format(time.StampMilli), len(got.tokens), got.err))
				} else {
					l.ok++
				}
				l.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	t.Cleanup(l.stop)
	return l
}

func (l *routerLoad) stop() {
	l.cancel()
	<-l.done
}

// take returns what the load got since the last take.
func (l *routerLoad) take() (ok int, failed []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, failed = l.ok, l.failed
	l.ok, l.failed = 0, nil
	return ok, failed
}

// waitServed waits until the load has had n more requests served since
// the last take; it polls, the load having no event to await.
func (l *routerLoad) waitServed(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		ok := l.ok
		l.mu.Unlock()
		if ok >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router served %d requests within %s, want %d", ok, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workers is a condition on a passing list: exactly the workers of vs.
func workers(vs ...*vigil) func([]*api.ServiceEntry) bool {
	want := make([]string, len(vs))
	for i, v := range vs {
		want[i] = v.WorkerID
	}
	slices.Sort(want)
	return func(es []*api.ServiceEntry) bool {
		got := make([]string, 0, len(es))
		for _, e := range es {
			got = append(got, e.Service.Meta["worker_id"])
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	}
}

// joined is the router's log line for a worker entering its view of
// discovery.
func joined(v *vigil) string { return "worker joined: addr=" + v.Listen + " worker_id=" + v.WorkerID }

// TestConsulCluster: a real Consul cluster on loopback, three servers and
// two client agents, each with its own data directory and ports; three
// workers' vigils on the first client agent, the router on the second.
// Workers A and B serve, C's engine sleeps.
//
//  1. The leader is killed under load (requests flowing through the
//     router): a new leader is elected, no worker leaves the passing list
//     (watched on the router's agent, stale reads, every answer), the
//     router drops no worker and no request fails.
//  2. Two of the three servers are killed: the quorum is lost for 30s.
//     Meanwhile A's engine sleeps and C's wakes. The vigils keep serving
//     (B and C answer directly); the router keeps its last known workers
//     (A and B: it drops none, takes none, and its requests, refused by
//     A, are served by B), and a router started now learns them too
//     (stale reads). Once the servers are back everything converges
//     (the passing list and the router's view become B and C) within
//     30s; the test logs how long it took.
//  3. The client agent of the vigils is restarted, killed (SIGKILL) and
//     stopped gracefully (SIGTERM: it leaves the cluster, and the catalog
//     drops its workers): its workers are passing again within the TTL +
//     1s of its return, and the vigils never exit nor report an engine
//     loss.
func TestConsulCluster(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const (
		ttl         = 3 * time.Second
		quorumLost  = 30 * time.Second
		convergence = 30 * time.Second
	)
	cl, err := harness.StartCluster(starter{t}, consulBin(t), t.TempDir(), "e2e", 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	vigils := &consulAgent{Consul: cl.Clients[0], t: t}
	routers := &consulAgent{Consul: cl.Clients[1], t: t}
	e := firstEngine()
	svc := uniqueService(t)
	start := func() (*mock, *vigil) {
		m := startMock(t, e, harness.MockOpts{TokenDelay: delay(10 * time.Millisecond)})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: vigils, service: svc,
			extra: []string{"--check-ttl", ttl.String()}})
		return m, v
	}
	mA, vA := start()
	_, vB := start()
	mC, vC := start()
	routers.passing(t, svc, 30*time.Second, workers(vA, vB, vC))
	mC.post(t, "/sleep", nil)
	routers.passing(t, svc, 30*time.Second, workers(vA, vB))
	r := startRouter(t, routers, svc, 1)
	for _, v := range []*vigil{vA, vB} {
		r.waitLine(joined(v), 30*time.Second)
	}
	load := startRouterLoad(t, r.GRPC)
	load.waitServed(t, 20, 30*time.Second)
	load.take()

	if !t.Run("leader killed under load", func(t *testing.T) {
		leftBefore := r.Count("worker left discovery")
		w, err := routers.Watch(svc)
		if err != nil {
			t.Fatal(err)
		}
		leader, err := cl.WaitLeader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := leader.Stop(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.WaitLeader(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("new leader %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
		// The load goes on under the new leader for a while.
		load.waitServed(t, 100, 60*time.Second)
		ok, failed := load.take()
		history, queryFailures := w.Stop()
		t.Logf("%d requests served through the router, %d failed; %d of the watch's queries failed", ok, len(failed), queryFailures)
		if len(failed) > 0 {
			t.Errorf("%d requests failed after the leader was killed:\n%s", len(failed), strings.Join(failed, "\n"))
		}
		if u := harness.Unsteady(history); u != "" {
			t.Errorf("a worker left the passing list after the leader was killed:\n%s", u)
		}
		if n := r.Count("worker left discovery") - leftBefore; n > 0 {
			t.Errorf("the router dropped %d workers after the leader was killed", n)
		}
		// The killed server back, and the cluster whole again.
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		if err := cl.WaitHealthy(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	if !t.Run("quorum lost for 30s", func(t *testing.T) {
		leader, err := cl.WaitLeader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		down := []*harness.Consul{leader}
		var survivor *harness.Consul
		for _, s := range cl.Servers {
			switch {
			case s == leader:
			case len(down) < 2:
				down = append(down, s)
			default:
				survivor = s
			}
		}
		leftBefore, joinedBefore := r.Count("worker left discovery"), r.Count(joined(vC))
		w, err := routers.Watch(svc)
		if err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		for _, s := range down {
			if err := s.Stop(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		waitNoLeader(t, survivor)
		t.Logf("the surviving server knew no leader %s after two servers were killed", time.Since(lost).Round(time.Millisecond))

		// Meanwhile A's engine sleeps and C's wakes: their vigils withdraw
		// and register with their agent, which cannot pass either on to
		// the servers (and, trying to, holds its local state for up to
		// rpc_hold_timeout, 7s, at a time: local writes wait).
		mA.post(t, "/sleep", nil)
		mC.post(t, "/wake", nil)
		vA.waitLine("to=not-ready", 10*time.Second)
		vC.waitCount(t, "to=serving", 2, 10*time.Second)
		for _, v := range []*vigil{vB, vC} {
			if got := generate(context.Background(), workerClient(t, v.Listen), tokenPrompt("direct", 2, 1), nil); got.err != nil {
				t.Errorf("worker %s refused a request while the cluster had no quorum: %v", v.WorkerID, got.err)
			}
		}
		// A router started now learns the last known workers.
		r2 := startRouter(t, routers, svc, 1)
		if got := generate(context.Background(), workerClient(t, r2.GRPC), tokenPrompt("late router", 2, 1), nil); got.err != nil || len(got.tokens) != 2 {
			t.Errorf("request through a router started without quorum: %d tokens, err %v", len(got.tokens), got.err)
		}
		select {
		case <-time.After(time.Until(lost.Add(quorumLost))): // the outage itself
		case <-vA.proc.Done():
		case <-vB.proc.Done():
		case <-vC.proc.Done():
		}
		ok, failed := load.take()
		t.Logf("without quorum: %d requests served through the router, %d failed", ok, len(failed))
		if len(failed) > 0 {
			t.Errorf("%d requests through the router failed without quorum:\n%s", len(failed), strings.Join(failed, "\n"))
		}
		if n := r.Count("worker left discovery") - leftBefore; n > 0 {
			t.Errorf("the router dropped %d workers without quorum, want its last known ones kept", n)
		}
		if r.Count(joined(vC)) > joinedBefore {
			t.Errorf("the router took worker C without quorum")
		}

		back := time.Now()
		for _, s := range down {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cl.WaitLeader(convergence); err != nil {
			t.Fatal(err)
		}
		elected := time.Since(back)
		_, first := routers.passing(t, svc, convergence, workers(vB, vC))
		// Watch on for two TTLs, for changes after the first look: a check
		// that lapsed on the agent while it could not sync shows up once
		// the agent syncs, and passes again at its next renewal.
		time.Sleep(2 * ttl) // an observation window, not a synchronisation
		history, _ := w.Stop()
		settled := lastChange(history, back)
		routerSettled, view := routerView(t, r, back)
		t.Logf("quorum back: leader elected %s, passing list B and C first %s, settled %s; router settled on %s %s after the servers restarted",
			elected.Round(time.Millisecond), first.Sub(back).Round(time.Millisecond), settled.Sub(back).Round(time.Millisecond),
			view, routerSettled.Sub(back).Round(time.Millisecond))
		t.Logf("the instances as the router's agent saw them, from the kill on:\n%s", harness.Unsteady(history))
		want := []string{vB.Listen, vC.Listen}
		slices.Sort(want)
		if !slices.Equal(view, want) {
			t.Errorf("router's workers after the quorum returned = %v, want B and C %v", view, want)
		}
		if !final(history, svc, vB, vC) {
			t.Errorf("passing list after the quorum returned is not B and C alone:\n%s", harness.Unsteady(history))
		}
		for _, at := range []time.Time{settled, routerSettled} {
			if d := at.Sub(back); d > convergence {
				t.Errorf("converged %s after the servers restarted, want within %s", d, convergence)
			}
		}
		if err := cl.WaitHealthy(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		if !t.Run("client agent restarted after "+sigName(sig), func(t *testing.T) {
			w, err := routers.Watch(svc)
			if err != nil {
				t.Fatal(err)
			}
			if err := vigils.Stop(sig); err != nil {
				t.Fatal(err)
			}
			if err := vigils.Start(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			routers.passing(t, svc, 30*time.Second, workers(vB, vC))
			// Watch on for two TTLs: the servers may mark a killed agent's
			// node failed after it is back, and take its workers out
			// until it rejoins.
			time.Sleep(2 * ttl) // an observation window, not a synchronisation
			history, _ := w.Stop()
			settled := lastChange(history, back)
			t.Logf("workers passing for good %s after the client agent answered again; their states:\n%s",
				settled.Sub(back).Round(time.Millisecond), harness.Unsteady(history))
			if !final(history, svc, vB, vC) {
				t.Errorf("passing list after the client agent's restart is not B and C alone:\n%s", harness.Unsteady(history))
			}
			if d := settled.Sub(back); d > ttl+time.Second {
				t.Errorf("workers passing again %s after the client agent's restart, want within the TTL + 1s (%s)", d, ttl+time.Second)
			}
		}) {
			return
		}
	}

	load.stop()
	for _, v := range []*vigil{vA, vB, vC} {
		notLost(t, v)
		v.term(t)
		v.exits(0, exitBound)
	}
}

// lastChange is the time of the last state in history after since, or
// since when there is none.
func lastChange(history []harness.InstanceState, since time.Time) time.Time {
	last := since
	for _, s := range history {
		if s.At.After(last) {
			last = s.At
		}
	}
	return last
}

// final reports whether history ends with the workers of vs passing and
// every other instance absent.
func final(history []harness.InstanceState, svc string, vs ...*vigil) bool {
	last := map[string]string{}
	for _, s := range history {
		last[s.ServiceID] = s.Status
	}
	for _, v := range vs {
		if last[svc+"-"+v.WorkerID] != api.HealthPassing {
			return false
		}
		delete(last, svc+"-"+v.WorkerID)
	}
	for _, st := range last {
		if st != harness.Absent {
			return false
		}
	}
	return true
}

// routerView reads the router's log for the workers it routes to now,
// by address, sorted, and the time of the last change after since.
func routerView(t *testing.T, r *router, since time.Time) (time.Time, []string) {
	t.Helper()
	view := map[string]bool{}
	last := since
	for _, l := range strings.Split(r.output(), "\n") {
		joinedLine := strings.Contains(l, "worker joined: ")
		if !joinedLine && !strings.Contains(l, "worker left discovery: ") {
			continue
		}
		_, rest, _ := strings.Cut(l, "addr=")
		addr, _, _ := strings.Cut(rest, " ")
		view[addr] = joinedLine
		stamp, _, _ := strings.Cut(l, " ")
		at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", stamp)
		if err != nil {
			t.Fatalf("router log line %q: %v", l, err)
		}
		if at.After(last) {
			last = at
		}
	}
	var addrs []string
	for a, in := range view {
		if in {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	return last, addrs
}

// waitNoLeader polls s until it knows no leader: the quorum is lost.
func waitNoLeader(t *testing.T, s *harness.Consul) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := s.Client.Status().Leader()
		if err == nil && leader == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the surviving server still names leader %q (error %v) 30s after two of three servers were killed", leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCount waits until n lines holding substr have been logged.
func (p *proc) waitCount(t *testing.T, substr string, n int, timeout time.Duration) {
	t.Helper()
	if err := p.WaitCount(substr, n, timeout); err != nil {
		t.Fatal(err)
	}
}

// sigName names a signal for a step's name.
func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}
