package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// consulBehind puts a harness.Proxy in front of c's HTTP API and returns
// it with the agent as vigil reaches it, through the proxy; the agent's
// Client, the test's observer, still talks to c directly.
func consulBehind(t *testing.T, c *consulAgent) (*harness.Proxy, *consulAgent) {
	t.Helper()
	p, err := harness.StartProxy(c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, &consulAgent{Consul: &harness.Consul{Proc: c.Proc, Addr: p.Addr, Client: c.Client}, t: t}
}

// registryFailuresLogged counts vigil's log lines about failed registry
// updates (the announcer logs the first of a run and every 10th).
func registryFailuresLogged(v *vigil) int {
	return strings.Count(v.output(), "registry update failed")
}

// notLost fails the test if vigil exited or took discovery trouble for an
// engine loss.
func notLost(t *testing.T, v *vigil) {
	t.Helper()
	if v.exited() {
		t.Fatalf("vigil exited with %d during Consul trouble", v.exitCode())
	}
	if l := v.findLine("engine lost"); l != "" {
		t.Errorf("vigil took Consul trouble for an engine loss: %s", l)
	}
}

// termExitsZero sends SIGTERM and expects the ordinary drain: the worker
// deregistered, exit 0.
func termExitsZero(t *testing.T, v *vigil) {
	t.Helper()
	v.term(t)
	v.exits(0, exitBound, "worker deregistered")
}

// TestConsulOutage: vigil's Consul agent stays up but vigil cannot reach
// it for 30s, its connections refused or black-holed (calls hang until
// their bound). Meanwhile vigil keeps serving requests and does not exit,
// logs the outage without flooding (the first failure and every 10th),
// and never as an engine loss; the check, which the agent turned critical
// when its TTL ran out, is passing again within the TTL + 1s of the
// agent's return; SIGTERM then drains and exits 0 as usual.
func TestConsulOutage(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const (
		ttl    = 3 * time.Second
		outage = 30 * time.Second
	)
	for _, fault := range []harness.Fault{harness.Refuse, harness.Blackhole} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			e := firstEngine()
			c := consulFor(t)
			proxy, viaProxy := consulBehind(t, c)
			svc := uniqueService(t)
			m := startMock(t, e, harness.MockOpts{})
			v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: viaProxy, service: svc,
				extra: []string{"--check-ttl", ttl.String()}})
			c.passing(t, svc, 30*time.Second, count(1))
			wc := workerClient(t, v.Listen)

			down := time.Now()
			proxy.SetFault(fault)
			// The agent, which vigil no longer reaches, lets the check lapse.
			_, lapsed := c.passing(t, svc, ttl+registerBound+5*time.Second, count(0))
			t.Logf("check critical %s after the agent became unreachable (TTL %s)", lapsed.Sub(down).Round(time.Millisecond), ttl)

			// Requests keep being served throughout, a few a second.
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			served := 0
			for time.Since(down) < outage {
				got := generate(context.Background(), wc, tokenPrompt(fmt.Sprint("outage-", served), 2, 1), nil)
				if got.err != nil || len(got.tokens) != 2 {
					t.Fatalf("request %d during the Consul outage: %d tokens, err %v", served, len(got.tokens), got.err)
				}
				served++
				<-tick.C
			}
			notLost(t, v)

			back := time.Now()
			proxy.SetFault(harness.Pass)
			_, passing := c.passing(t, svc, ttl+registerBound+10*time.Second, count(1))
			d := passing.Sub(back)
			t.Logf("%d requests served during the %s outage; passing again %s after the agent's return", served, outage, d.Round(time.Millisecond))
			if d > ttl+time.Second {
				t.Errorf("passing again %s after the agent's return, want within the TTL + 1s (%s)", d, ttl+time.Second)
			}
			v.waitLine("registry reachable again", 10*time.Second)

			// One line for the first failure and one for every 10th: a
			// renewal every TTL/3 fails at most outage/(TTL/3) times.
			most := 1 + int(outage/(ttl/3))/10
			if n := registryFailuresLogged(v); n < 1 || n > most {
				t.Errorf("vigil logged %d registry failures over the %s outage, want 1 to %d:\n%s", n, outage, most, v.output())
			}
			notLost(t, v)
			termExitsZero(t, v)
		})
	}
}

// soakDuration is how long TestConsulLatency holds the latency:
// VIGIL_SOAK_DURATION (`make soak` sets 5m), else 60s.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("VIGIL_SOAK_DURATION")
	if s == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("VIGIL_SOAK_DURATION=%q: want a positive duration such as 5m", s)
	}
	return d
}

// TestConsulLatency: every call vigil makes to its Consul agent arrives
// late (a slow link, an overloaded agent), 1.5s under a 3s TTL, and 2.5s
// (beyond the 2s that every call got before) under a 6s TTL. For the whole
// soak (60s; `make soak` runs 5 minutes) the check, watched on the agent
// directly, never leaves passing, not even for a moment between two
// answers (its ModifyIndex never moves); vigil registers, logs no failed
// registry update and no engine loss, and on SIGTERM deregisters and exits
// 0.
func TestConsulLatency(t *testing.T) {
	skipShort(t)
	t.Parallel()
	soak := soakDuration(t)
	for _, tc := range []struct {
		latency, ttl time.Duration
	}{
		{1500 * time.Millisecond, 3 * time.Second},
		{2500 * time.Millisecond, 6 * time.Second},
	} {
		t.Run(fmt.Sprintf("%s latency %s TTL", tc.latency, tc.ttl), func(t *testing.T) {
			t.Parallel()
			e := firstEngine()
			c := consulFor(t)
			proxy, viaProxy := consulBehind(t, c)
			proxy.SetLatency(tc.latency)
			svc := uniqueService(t)
			m := startMock(t, e, harness.MockOpts{})
			v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: viaProxy, service: svc,
				extra: []string{"--check-ttl", tc.ttl.String()}})
			c.passing(t, svc, 30*time.Second, count(1))
			w, err := c.Watch(svc)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-v.proc.Done():
			case <-time.After(soak): // the soak itself: time under latency
			}
			history, _ := w.Stop()
			if u := harness.Unsteady(history); u != "" {
				t.Errorf("the check left passing under %s latency with a %s TTL:\n%s", tc.latency, tc.ttl, u)
			}
			notLost(t, v)
			v.waitLine("worker registered", 0)
			if n := registryFailuresLogged(v); n != 0 {
				t.Errorf("vigil logged %d registry failures under %s latency, want none:\n%s", n, tc.latency, v.output())
			}
			termExitsZero(t, v)
		})
	}
}
