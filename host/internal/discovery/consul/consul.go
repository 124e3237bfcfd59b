// Package consul is the Consul discovery backend, both halves: a
// [Registry] that registers a worker with the local agent, with a TTL check
// that the host keeps passing while the engine serves, and a [Discoverer]
// that follows a service's passing workers with blocking queries.
//
// The Registry uses the agent endpoints only (/v1/agent/service/register,
// /v1/agent/check/update, /v1/agent/service/deregister,
// /v1/agent/health/service/id to read who owns a registration and whether
// the operator has it in maintenance, and /v1/agent/service/maintenance to
// restore that maintenance when it registers the service again); with ACLs
// enabled its token needs service:write on the service name (which grants
// service:read). With a token file (CONSUL_HTTP_TOKEN_FILE) both halves
// read it again after each 403. The Discoverer reads /v1/health/service;
// see Health for its ACLs.
//
// The owner token is the service meta "owner"; each renewal writes the TTL
// check's output with a renewal count, which is how another vigil given the
// same worker id sees that this one is alive (the agent keeps no time of a
// check's last update).
package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
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
	// TokenFile is the file the client's token was read from
	// (CONSUL_HTTP_TOKEN_FILE, api.Config.TokenFile): it is read again
	// after each refusal (HTTP 403), and a new token in it used from then
	// on, so that a token rotated in the file is taken up without a
	// restart. Empty: the client's token, always.
	TokenFile string
}

// Registry is a discovery.Registry over a Consul agent.
type Registry struct {
	agent *api.Agent
	acl   *api.ACL
	addr  string
	opts  Options
	token *tokenFile // nil without Options.TokenFile

	renewals uint64 // Heartbeats so far; the Announcer calls one at a time

	// mu guards maint, which Heartbeat's read of the owner sets beside its
	// update.
	mu sync.Mutex
	// maint is the reason of the operator's maintenance of the worker's
	// service (consul maint -service), as vigil last read its own
	// registration; nil: not in maintenance. Register restores it, so that
	// maintenance outlives vigil's own withdrawals (engine not ready) and
	// the agent's loss of the service, for as long as this process runs.
	maint *string
}

var _ discovery.Registry = (*Registry)(nil)

// New returns a Registry over client's agent.
func New(client *api.Client, addr string, opts Options) *Registry {
	c := &Registry{agent: client.Agent(), acl: client.ACL(), addr: addr, opts: opts}
	if opts.TokenFile != "" {
		c.token = newTokenFile(opts.TokenFile)
	}
	return c
}

// MaintenanceCheckID is the id of the check Consul adds to a service the
// operator puts in maintenance.
func MaintenanceCheckID(r discovery.Registration) string {
	return "_service_maintenance:" + ServiceID(r)
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
// worker is in the passing list at once. A service the operator had put in
// maintenance is registered with its check critical, put back in
// maintenance with the reason it had, and only then passed, so that it is
// never passing in between.
func (c *Registry) Register(ctx context.Context, r discovery.Registration) error {
	reason, inMaint := c.maintenance()
	status := api.HealthPassing
	if inMaint {
		status = api.HealthCritical
	}
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
			Status:                         status,
			DeregisterCriticalServiceAfter: c.opts.DeregisterAfter.String(),
		},
	}
	err := c.authorized(func(token string) error {
		return c.agent.ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: token}.WithContext(ctx))
	})
	if err != nil {
		return fmt.Errorf("registering %s in consul: %w", ServiceID(r), denied(err))
	}
	if inMaint {
		return c.restoreMaintenance(ctx, r, reason)
	}
	return nil
}

// restoreMaintenance puts r's service back in maintenance for reason, and
// then passes its check.
func (c *Registry) restoreMaintenance(ctx context.Context, r discovery.Registration, reason string) error {
	err := c.authorized(func(token string) error {
		return c.agent.EnableServiceMaintenanceOpts(ServiceID(r), reason, c.query(ctx, token))
	})
	if err != nil {
		return fmt.Errorf("putting %s back in the operator's maintenance: %w", ServiceID(r), denied(err))
	}
	return c.pass(ctx, r)
}

// pass passes r's TTL check, counting a renewal.
func (c *Registry) pass(ctx context.Context, r discovery.Registration) error {
	c.renewals++
	return c.authorized(func(token string) error {
		return c.agent.UpdateTTLOpts(CheckID(r), renewalOutput(r.Owner, c.renewals), api.HealthPassing, c.query(ctx, token))
	})
}

// query is the options of one call under ctx with token ("": the
// client's).
func (c *Registry) query(ctx context.Context, token string) *api.QueryOptions {
	return (&api.QueryOptions{Token: token}).WithContext(ctx)
}

// maintenance is the reason of the operator's maintenance as last read;
// ok is false when the service was not in maintenance.
func (c *Registry) maintenance() (reason string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maint == nil {
		return "", false
	}
	return *c.maint, true
}

// Heartbeat passes the TTL check, with an output that counts renewals. A
// 404 means the agent no longer knows the check (it restarted and lost its
// state).
//
// It reads the service's owner at the same time, not before: the two calls
// then cost a renewal one round trip, so that a slow agent does not make
// the check miss its TTL. The update leaves the service and its meta as
// they are; should the service be another owner's, this one renewal has
// passed its check, and the Announcer stops renewing and watches that
// owner's renewals from a read taken after this update.
func (c *Registry) Heartbeat(ctx context.Context, r discovery.Registration) error {
	var (
		wg                  sync.WaitGroup
		claim               discovery.Claim
		found               bool
		claimErr, updateErr error
	)
	wg.Go(func() { claim, found, claimErr = c.Claim(ctx, r) })
	updateErr = c.pass(ctx, r)
	wg.Wait()
	switch {
	case isNotFound(updateErr):
		return fmt.Errorf("%w: consul check %s: %v", discovery.ErrNotRegistered, CheckID(r), updateErr)
	case updateErr != nil:
		return fmt.Errorf("passing consul check %s: %w", CheckID(r), denied(updateErr))
	case claimErr == nil && found && claim.Owner != r.Owner:
		return fmt.Errorf("%w: consul service %s is another vigil's, advertising %s (owner %s)",
			discovery.ErrNotRegistered, ServiceID(r), claim.Addr(), claim.Owner)
	}
	// A failed read alone fails nothing: the check was passed, and the next
	// renewal reads again.
	return nil
}

// renewalOutput is the TTL check's output after the n-th renewal by owner.
func renewalOutput(owner string, n uint64) string {
	return fmt.Sprintf("engine serving; renewal %d by vigil %s", n, owner)
}

// Deregister removes the service and its check, unless another owner's
// registration has taken their place: that is left, and the error wraps
// discovery.ErrNotRegistered.
func (c *Registry) Deregister(ctx context.Context, r discovery.Registration) error {
	claim, found, err := c.Claim(ctx, r)
	if err != nil {
		return fmt.Errorf("deregistering %s from consul: %w", ServiceID(r), denied(err))
	}
	if found && claim.Owner != r.Owner {
		return fmt.Errorf("%w: consul service %s is another vigil's, advertising %s (owner %s)",
			discovery.ErrNotRegistered, ServiceID(r), claim.Addr(), claim.Owner)
	}
	err = c.authorized(func(token string) error { return c.agent.ServiceDeregisterOpts(ServiceID(r), c.query(ctx, token)) })
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("deregistering %s from consul: %w", ServiceID(r), denied(err))
	}
	return nil
}

// Claim reads the agent's registration of r's worker: its owner from the
// service meta, its renewals from the TTL check's output, and stale when
// the check is critical (not renewed for a TTL, as the agent measures it).
// Reading r's own registration, it also notes whether the operator has it
// in maintenance, for Register to restore.
func (c *Registry) Claim(ctx context.Context, r discovery.Registration) (discovery.Claim, bool, error) {
	var info *api.AgentServiceChecksInfo
	err := c.authorized(func(token string) (err error) {
		_, info, err = c.agent.AgentHealthServiceByIDOpts(ServiceID(r), c.query(ctx, token))
		if syn := (*json.SyntaxError)(nil); errors.As(err, &syn) {
			err = c.explain(ctx, token, err)
		}
		return err
	})
	if err != nil {
		return discovery.Claim{}, false, fmt.Errorf("reading consul service %s: %w", ServiceID(r), denied(err))
	}
	if info == nil || info.Service == nil {
		return discovery.Claim{}, false, nil
	}
	claim := discovery.Claim{Owner: info.Service.Meta[discovery.MetaOwner], Address: info.Service.Address, Port: info.Service.Port}
	var maint *string
	for _, ch := range info.Checks {
		switch {
		case ch == nil:
		case ch.CheckID == CheckID(r):
			claim.Renewal, claim.Stale = ch.Output, ch.Status == api.HealthCritical
		case ch.CheckID == MaintenanceCheckID(r):
			maint = &ch.Notes
		}
	}
	if claim.Owner == r.Owner {
		c.mu.Lock()
		c.maint = maint
		c.mu.Unlock()
	}
	return claim, true, nil
}

// explain returns the token's refusal in err's place when the agent
// refuses the token itself: consul/api reads the agent's health endpoint's
// refusal ("ACL not found", for an unknown token) as JSON and reports only
// that it is not, so the token is asked about once to learn why.
func (c *Registry) explain(ctx context.Context, token string, err error) error {
	_, _, terr := c.acl.TokenReadSelf(c.query(ctx, token))
	var se api.StatusError
	if errors.As(terr, &se) && se.Code == http.StatusForbidden {
		return terr
	}
	return err
}

// denied marks a 403 from Consul (an ACL refusal) as
// discovery.ErrPermissionDenied, keeping Consul's words, which name the
// missing permission ("... lacks permission 'service:write' on \"llm\"",
// or "ACL not found" for an unknown token); other errors are returned as
// they are.
func denied(err error) error {
	var se api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusForbidden {
		return fmt.Errorf("%w: %w", discovery.ErrPermissionDenied, err)
	}
	return err
}

// isForbidden reports whether err is Consul's 403.
func isForbidden(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusForbidden
}

func isNotFound(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}
