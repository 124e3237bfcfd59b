// Package consul is the Consul discovery backend, both halves: a
// [Registry] that registers a worker with the local agent, with a TTL check
// that the host keeps passing while the engine serves, and a [Discoverer]
// that follows a service's passing workers with blocking queries.
//
// The Registry uses the agent endpoints only (/v1/agent/service/register,
// /v1/agent/check/update, /v1/agent/service/deregister); with ACLs enabled
// its token needs service:write on the service name. The Discoverer reads
// /v1/health/service; see Health for its ACLs.
package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// MinDeregisterAfter is Consul's floor for DeregisterCriticalServiceAfter:
// the agent reaps critical services no sooner than one minute.
const MinDeregisterAfter = time.Minute

// Options configures a Registry.
type Options struct {
	// TTL of the check; the Announcer renews it every third. Required.
	TTL time.Duration
	// DeregisterAfter removes a service whose check stayed critical this
	// long (vigil killed, never deregistered). At least MinDeregisterAfter.
	DeregisterAfter time.Duration
}

// Registry is a discovery.Registry over a Consul agent.
type Registry struct {
	agent *api.Agent
	addr  string
	opts  Options
}

var _ discovery.Registry = (*Registry)(nil)

// New returns a Registry over client's agent.
func New(client *api.Client, addr string, opts Options) *Registry {
	return &Registry{agent: client.Agent(), addr: addr, opts: opts}
}

// ServiceID is the Consul service id of a worker: stable across restarts of
// vigil, unique per service and worker.
func ServiceID(r discovery.Registration) string { return r.Service + "-" + r.WorkerID }

// CheckID is the id of a worker's TTL check.
func CheckID(r discovery.Registration) string { return "vigil:" + ServiceID(r) }

func (c *Registry) String() string { return "consul " + c.addr }

// TTL is the TTL of the worker's check.
func (c *Registry) TTL() time.Duration { return c.opts.TTL }

// Register registers the service with its TTL check already passing, so the
// worker is in the passing list at once.
func (c *Registry) Register(ctx context.Context, r discovery.Registration) error {
	reg := &api.AgentServiceRegistration{
		ID:      ServiceID(r),
		Name:    r.Service,
		Tags:    []string{r.Engine},
		Address: r.Address,
		Port:    r.Port,
		Meta:    r.Meta(),
		Check: &api.AgentServiceCheck{
			CheckID:                        CheckID(r),
			Name:                           "vigil engine health",
			Notes:                          "passing while the " + r.Engine + " engine serves; kept by vigil",
			TTL:                            c.opts.TTL.String(),
			Status:                         api.HealthPassing,
			DeregisterCriticalServiceAfter: c.opts.DeregisterAfter.String(),
		},
	}
	if err := c.agent.ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
		return fmt.Errorf("registering %s in consul: %w", ServiceID(r), err)
	}
	return nil
}

// Heartbeat passes the TTL check. A 404 means the agent no longer knows the
// check (it restarted and lost its state).
func (c *Registry) Heartbeat(ctx context.Context, r discovery.Registration) error {
	q := (&api.QueryOptions{}).WithContext(ctx)
	err := c.agent.UpdateTTLOpts(CheckID(r), "engine serving", api.HealthPassing, q)
	if isNotFound(err) {
		return fmt.Errorf("%w: consul check %s: %v", discovery.ErrNotRegistered, CheckID(r), err)
	}
	if err != nil {
		return fmt.Errorf("passing consul check %s: %w", CheckID(r), err)
	}
	return nil
}

// Deregister removes the service and its check.
func (c *Registry) Deregister(ctx context.Context, r discovery.Registration) error {
	q := (&api.QueryOptions{}).WithContext(ctx)
	if err := c.agent.ServiceDeregisterOpts(ServiceID(r), q); err != nil && !isNotFound(err) {
		return fmt.Errorf("deregistering %s from consul: %w", ServiceID(r), err)
	}
	return nil
}

func isNotFound(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}
