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

	starter Starter
	bin     string
	args    []string
	// member: one agent of a Cluster, whose start waits for its HTTP API
	// alone, a leader being the cluster's business.
	member bool
	// name names the process in errors and logs: "consul" unless set.
	name string
	// acl: the agent was started with an initial management token, which
	// its leader writes after it is elected.
	acl bool
}

// StartConsul starts a dev agent and waits until it has a leader.
func (h *Harness) StartConsul() (*Consul, error) {
	return StartConsul(h, h.Bins.Consul, "bench")
}

// StartConsul starts the dev agent bin through s, as a node named after
// node and its HTTP port, and waits until it has a leader.
func StartConsul(s Starter, bin, node string) (*Consul, error) {
	return startConsul(s, bin, node, "")
}

// StartConsulACL is StartConsul with ACLs enabled, denying by default, and
// management as the initial management token (a UUID), which Client
// carries, and the agent's own token (for its node's registration); vigil
// gets no token but the CONSUL_HTTP_TOKEN a test gives it.
func StartConsulACL(s Starter, bin, node, management string) (*Consul, error) {
	return startConsul(s, bin, node, management)
}

func startConsul(s Starter, bin, node, management string) (*Consul, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	c := &Consul{Addr: Addr(ports[0]), starter: s, bin: bin, acl: management != ""}
	c.args = []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", fmt.Sprintf("%s-%d", node, ports[0]),
		"-http-port", fmt.Sprint(ports[0]), "-dns-port", "-1", "-grpc-port", "-1",
		"-serf-lan-port", fmt.Sprint(ports[1]), "-serf-wan-port", fmt.Sprint(ports[2]),
		"-server-port", fmt.Sprint(ports[3]),
		"-hcl", "ports { grpc_tls = -1 }", "-log-level", "warn"}
	if management != "" {
		c.args = append(c.args, "-hcl", fmt.Sprintf(`acl { enabled = true, default_policy = "deny", tokens { initial_management = %q, agent = %q } }`, management, management))
	}
	if c.Client, err = api.NewClient(&api.Config{Address: c.Addr, Token: management}); err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	return c, c.start()
}

func (c *Consul) start() error {
	var err error
	name := c.name
	if name == "" {
		name = "consul"
	}
	if c.Proc, err = c.starter.Start(name, nil, c.bin, c.args...); err != nil {
		return err
	}
	if c.member {
		return c.waitUp()
	}
	return c.waitLeader()
}

// Restart kills the agent and starts it again on the same ports; a dev
// agent keeps no state, so all registrations are gone.
func (c *Consul) Restart() error {
	c.Proc.Kill()
	if _, _, err := c.Proc.Wait(killWait); err != nil {
		return err
	}
	return c.start()
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
			if !c.acl {
				return nil
			}
			// A new leader writes the initial management token after its
			// election; until then the token is "ACL not found".
			if _, _, err = c.Client.ACL().TokenReadSelf(nil); err == nil {
				return nil
			}
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
		go func() {
			_, at, err := c.block(ctx, service, meta.LastIndex, cond)
			o.finish(at, err)
		}()
	}
	return o
}

// Passing waits, with blocking queries from the current state on, until
// the passing instances of service satisfy cond, and returns them with the
// time the answer came. A failed query (the agent may be restarting) is
// asked again until ctx ends.
func (c *Consul) Passing(ctx context.Context, service string, cond func([]*api.ServiceEntry) bool) ([]*api.ServiceEntry, time.Time, error) {
	return c.block(ctx, service, 0, cond)
}

func (c *Consul) block(ctx context.Context, service string, index uint64, cond func([]*api.ServiceEntry) bool) ([]*api.ServiceEntry, time.Time, error) {
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}).WithContext(ctx)
		entries, meta, err := c.Client.Health().Service(service, "", true, q)
		now := time.Now()
		switch {
		case err == nil && cond(entries):
			return entries, now, nil
		case err == nil:
			index = meta.LastIndex
		case ctx.Err() != nil:
			return nil, time.Time{}, fmt.Errorf("passing instances of %s: condition not reached: %w", service, ctx.Err())
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
