package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulStartTimeout bounds the wait for a dev agent to elect itself.
const consulStartTimeout = 60 * time.Second

// blockingWait is the wait time of one blocking query; an observer asks
// again when it passes without a change.
const blockingWait = 10 * time.Second

// Consul is a dev-mode Consul agent on loopback ports of its own.
type Consul struct {
	Proc   *Proc
	Addr   string
	Client *api.Client
}

// StartConsul starts a dev agent and waits until it has a leader.
func (h *Harness) StartConsul() (*Consul, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	c := &Consul{Addr: Addr(ports[0])}
	args := []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", fmt.Sprintf("bench-%d", ports[0]),
		"-http-port", fmt.Sprint(ports[0]), "-dns-port", "-1", "-grpc-port", "-1",
		"-serf-lan-port", fmt.Sprint(ports[1]), "-serf-wan-port", fmt.Sprint(ports[2]),
		"-server-port", fmt.Sprint(ports[3]),
		"-hcl", "ports { grpc_tls = -1 }", "-log-level", "warn"}
	if c.Client, err = api.NewClient(&api.Config{Address: c.Addr}); err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	if c.Proc, err = h.Start("consul", nil, h.Bins.Consul, args...); err != nil {
		return nil, err
	}
	return c, c.waitLeader()
}

func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for len(out) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (c *Consul) waitLeader() error {
	deadline := time.Now().Add(consulStartTimeout)
	for {
		// Polling is the only way to learn of the leader election.
		leader, err := c.Client.Status().Leader()
		if err == nil && leader != "" {
			return nil
		}
		if c.Proc.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("consul agent did not elect a leader (last error: %v):\n%s", err, c.Proc.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Env points vigil at the agent.
func (c *Consul) Env() []string { return []string{"CONSUL_HTTP_ADDR=" + c.Addr} }

// Count is a condition on the passing list: exactly n instances.
func Count(n int) func([]*api.ServiceEntry) bool {
	return func(e []*api.ServiceEntry) bool { return len(e) == n }
}

// Observation is an observer of a service's passing list, waiting on
// Consul blocking queries until a condition holds.
type Observation struct {
	done chan struct{}
	at   time.Time
	err  error
}

// Observe answers the passing list of service once, then, unless cond
// already holds, keeps a blocking query open from that answer's index and
// records the time the first answer satisfying cond returns. Observe
// returns once the first answer is in, so that an event caused after it is
// seen by the blocking query rather than by a late first look.
func (c *Consul) Observe(ctx context.Context, service string, cond func([]*api.ServiceEntry) bool) *Observation {
	o := &Observation{done: make(chan struct{})}
	entries, meta, err := c.Client.Health().Service(service, "", true, (&api.QueryOptions{}).WithContext(ctx))
	now := time.Now()
	switch {
	case err != nil:
		o.finish(time.Time{}, fmt.Errorf("passing instances of %s: %w", service, err))
	case cond(entries):
		o.finish(now, nil)
	default:
		go c.block(ctx, service, meta.LastIndex, cond, o)
	}
	return o
}

func (c *Consul) block(ctx context.Context, service string, index uint64, cond func([]*api.ServiceEntry) bool, o *Observation) {
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}).WithContext(ctx)
		entries, meta, err := c.Client.Health().Service(service, "", true, q)
		now := time.Now()
		switch {
		case err == nil && cond(entries):
			o.finish(now, nil)
			return
		case err == nil:
			index = meta.LastIndex
		case ctx.Err() != nil:
			o.finish(time.Time{}, fmt.Errorf("passing instances of %s: condition not reached: %w", service, ctx.Err()))
			return
		default:
			// A transient failure: ask again from the start after a pause.
			index = 0
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func (o *Observation) finish(at time.Time, err error) {
	o.at, o.err = at, err
	close(o.done)
}

// Done is closed once the observation has its answer or failed.
func (o *Observation) Done() <-chan struct{} { return o.done }

// Wait returns the time of the answer that satisfied the condition.
func (o *Observation) Wait() (time.Time, error) {
	<-o.done
	return o.at, o.err
}

// WaitPassing blocks until cond holds for service's passing list, or
// timeout passes.
func (c *Consul) WaitPassing(service string, cond func([]*api.ServiceEntry) bool, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	at, err := c.Observe(ctx, service, cond).Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		return at, fmt.Errorf("passing instances of %s: condition not reached within %s", service, timeout)
	}
	return at, err
}
