package harness

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"
)

// Cluster is a Consul datacenter on loopback: servers that elect a leader
// among themselves and client agents joined to them, each a process with
// its own data directory and ports, as in production but on one host.
type Cluster struct {
	Servers, Clients []*Consul
}

// clusterHCL is the configuration every agent of a Cluster shares:
//   - gRPC off, as in the dev agent;
//   - raft_multiplier 1, Consul's setting for production servers on
//     fast links (the default of 5 is for the slowest VMs): a leader is
//     elected in about a second;
//   - dead servers left in the raft configuration, so that a killed
//     server stays a voter and two of three servers killed is a lost
//     quorum, whatever autopilot did after an earlier kill.
var clusterHCL = []string{
	"ports { grpc_tls = -1 }",
	"performance { raft_multiplier = 1 }",
	"autopilot { cleanup_dead_servers = false }",
}

// StartCluster starts servers Consul servers (-bootstrap-expect servers)
// and clients client agents through s, from bin, with data directories
// under dir and nodes named after node, and waits until every agent's
// HTTP API answers and the servers have elected a leader.
func StartCluster(s Starter, bin, dir, node string, servers, clients int) (*Cluster, error) {
	cl := &Cluster{}
	var joins []string
	var plans []clusterAgent
	for i := range servers + clients {
		ports, err := freePorts(4) // HTTP, serf LAN, serf WAN, server RPC
		if err != nil {
			return nil, err
		}
		role := "server"
		if i >= servers {
			role = "client"
		}
		c := &Consul{Addr: Addr(ports[0]), starter: s, bin: bin, member: true,
			name: fmt.Sprintf("consul %s %d", role, i)}
		if c.Client, err = api.NewClient(&api.Config{Address: c.Addr}); err != nil {
			return nil, fmt.Errorf("consul client: %w", err)
		}
		if i < servers {
			joins = append(joins, Addr(ports[1]))
			cl.Servers = append(cl.Servers, c)
		} else {
			cl.Clients = append(cl.Clients, c)
		}
		plans = append(plans, clusterAgent{c, role, ports})
	}
	for i, p := range plans {
		p.c.args = p.args(i, node, dir, servers, joins)
	}
	for _, p := range plans {
		if err := p.c.start(); err != nil {
			cl.Kill()
			return nil, err
		}
	}
	if _, err := cl.WaitLeader(consulStartTimeout); err != nil {
		cl.Kill()
		return nil, err
	}
	return cl, nil
}

// clusterAgent is one agent of a Cluster being started.
type clusterAgent struct {
	c     *Consul
	role  string // server or client
	ports []int  // HTTP, serf LAN, serf WAN, server RPC
}

// args is the command line of the cluster's i-th agent, a: a server
// expects servers servers, and every agent joins the servers other than
// itself (joins, their serf LAN addresses), retrying until they are up.
func (a clusterAgent) args(i int, node, dir string, servers int, joins []string) []string {
	name := fmt.Sprintf("%s-%s%d-%d", node, a.role, i, a.ports[0])
	args := []string{"agent", "-node", name, "-data-dir", filepath.Join(dir, name),
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", fmt.Sprint(a.ports[0]), "-dns-port", "-1", "-grpc-port", "-1",
		"-serf-lan-port", fmt.Sprint(a.ports[1]), "-serf-wan-port", fmt.Sprint(a.ports[2]),
		"-server-port", fmt.Sprint(a.ports[3]), "-retry-interval", "1s", "-log-level", "info"}
	if i < servers {
		args = append(args, "-server", "-bootstrap-expect", fmt.Sprint(servers))
	}
	for _, j := range joins {
		if j != Addr(a.ports[1]) {
			args = append(args, "-retry-join", j)
		}
	}
	for _, h := range clusterHCL {
		args = append(args, "-hcl", h)
	}
	return args
}

// Kill kills every agent of the cluster.
func (cl *Cluster) Kill() {
	for _, c := range append(append([]*Consul(nil), cl.Servers...), cl.Clients...) {
		if c.Proc != nil {
			c.Proc.Kill()
		}
	}
}

// ServerAddr is the address of a server agent's RPC port, as Consul
// names its leader.
func (c *Consul) ServerAddr() string {
	for i, a := range c.args {
		if a == "-server-port" && i+1 < len(c.args) {
			return net.JoinHostPort("127.0.0.1", c.args[i+1])
		}
	}
	return ""
}

// WaitLeader waits until a live server names a leader that is one of the
// cluster's live servers, and returns it. Leader elections are learnt by
// polling: Consul has no event for them.
func (cl *Cluster) WaitLeader(timeout time.Duration) (*Consul, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		for _, s := range cl.Servers {
			if s.Proc.Exited() {
				continue
			}
			leader, err := s.Client.Status().Leader()
			if err != nil {
				last = err
				continue
			}
			for _, l := range cl.Servers {
				if !l.Proc.Exited() && leader != "" && l.ServerAddr() == leader {
					return l, nil
				}
			}
			last = fmt.Errorf("%s names leader %q", s.name, leader)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("consul cluster elected no leader within %s (last: %v)", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop sends sig to the agent and waits for it to exit: SIGKILL for a
// crash, SIGTERM for a graceful stop (a client agent then leaves the
// cluster, as leave_on_terminate has it for clients).
func (c *Consul) Stop(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		c.Proc.Kill()
	} else if err := c.Proc.Signal(sig); err != nil {
		return err
	}
	_, _, err := c.Proc.Wait(killWait)
	return err
}

// Start starts a stopped agent again, on its ports and with its data
// directory, and waits until its HTTP API answers (the dev agent: until
// it has a leader).
func (c *Consul) Start() error {
	if c.Proc != nil && !c.Proc.Exited() {
		return fmt.Errorf("%s is running", c.name)
	}
	return c.start()
}

func (c *Consul) waitUp() error {
	deadline := time.Now().Add(consulStartTimeout)
	for {
		// Polling: nothing announces that the agent listens.
		_, err := c.Client.Agent().Self()
		if err == nil {
			return nil
		}
		if c.Proc.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s (last error: %v):\n%s", c.name, c.Addr, err, c.Proc.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitHealthy waits until autopilot reports every server of the cluster
// alive, healthy and a voter: the cluster tolerates one more failure.
func (cl *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		l, err := cl.WaitLeader(time.Until(deadline))
		if err != nil {
			return err
		}
		h, err := l.Client.Operator().AutopilotServerHealth(nil)
		switch {
		case err != nil:
			last = err
		case !h.Healthy || len(h.Servers) != len(cl.Servers):
			last = fmt.Errorf("autopilot: healthy %v, %d servers: %s", h.Healthy, len(h.Servers), serverHealth(h))
		default:
			voters := 0
			for _, s := range h.Servers {
				if s.Voter && s.Healthy {
					voters++
				}
			}
			if voters == len(cl.Servers) {
				return nil
			}
			last = fmt.Errorf("autopilot: %d healthy voters of %d: %s", voters, len(cl.Servers), serverHealth(h))
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("consul cluster not healthy within %s", timeout), last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serverHealth(h *api.OperatorHealthReply) string {
	parts := make([]string, 0, len(h.Servers))
	for _, s := range h.Servers {
		parts = append(parts, fmt.Sprintf("%s(voter %v, healthy %v, serf %s)", s.Name, s.Voter, s.Healthy, s.SerfStatus))
	}
	return strings.Join(parts, ", ")
}
