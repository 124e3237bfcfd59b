package consul

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// Health is the part of the Consul API a Discoverer uses; *api.Health
// (client.Health()) implements it. With ACLs enabled the token needs
// service:read on the service and node:read on the workers' nodes.
type Health interface {
	Service(service, tag string, passingOnly bool, q *api.QueryOptions) ([]*api.ServiceEntry, *api.QueryMeta, error)
}

// WaitTime bounds one blocking query; Consul answers earlier when the set
// changes.
const WaitTime = 5 * time.Minute

// backoffMin and backoffMax are the first and the longest wait before
// retrying a failed query; the wait doubles in between.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 2 * time.Second
)

// Discoverer is a discovery.Discoverer over Consul's /v1/health/service
// endpoint with passing-only results, watched with blocking queries: a
// change reaches the caller as soon as Consul sees it (a check turning
// critical, a deregistration).
//
// Its queries allow stale reads: any server answers, not only the leader.
// While the cluster has no leader (an election, a lost quorum) the set
// keeps coming, as of the last change the servers committed, instead of
// every query failing; a router started then still learns its workers.
// In a healthy cluster a follower lags the leader by milliseconds; a
// server just restarted may answer from further behind until it catches
// up, and the next answer corrects the set. (Answers say nothing reliable
// about a leader: a client agent answers blocking queries from its
// streaming view, whose answers never claim one.)
type Discoverer struct {
	health  Health
	service string
	log     hclog.Logger
}

var _ discovery.Discoverer = (*Discoverer)(nil)

// NewDiscoverer returns a Discoverer of service's workers; log may be nil.
func NewDiscoverer(health Health, service string, log hclog.Logger) *Discoverer {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Discoverer{health: health, service: service, log: log}
}

func (d *Discoverer) String() string { return "consul service " + d.service }

// Run watches until ctx ends.
func (d *Discoverer) Run(ctx context.Context, update func([]discovery.Registration)) {
	changed := discovery.OnChange(update)
	var (
		index    uint64
		failures discovery.Failures
		backoff  = backoffMin
		filtered bool // said once that ACLs hid workers
	)
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: WaitTime, AllowStale: true}).WithContext(ctx)
		entries, meta, err := d.health.Service(d.service, "", true, q)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			level, msg := hclog.Warn, "consul query failed; keeping the last set of workers"
			if err = denied(err); errors.Is(err, discovery.ErrPermissionDenied) {
				level, msg = hclog.Error, "consul refused the query for want of a permission; fix the token (service:read on the service, node:read on the workers' nodes); keeping the last set of workers"
			}
			failures.FailAt(d.log, level, msg, "service", d.service, "retry_in", backoff, "error", err)
			// A failed query may have lost track of the index (an agent
			// restart resets it); start over with a non-blocking query.
			index = 0
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, backoffMax)
			continue
		}
		failures.Recover(d.log, "consul query succeeded again", "service", d.service)
		if meta.ResultsFilteredByACLs && !filtered {
			// Consul answers a token that may not read a worker by leaving
			// it out, not by refusing the query: without this the router
			// would say nothing of workers it cannot see.
			filtered = true
			d.log.Warn("consul's ACLs hid some of the service's workers from this token: it may lack service:read on the service or node:read on the workers' nodes",
				"service", d.service, "workers_shown", len(entries))
		}
		backoff = backoffMin
		// Consul's blocking-query rules: an index that went backwards
		// (a restarted or different server) starts over from 0.
		if meta.LastIndex < index {
			index = 0
		} else {
			index = meta.LastIndex
		}
		changed(fromEntries(entries))
	}
}

// fromEntries reads registrations from health entries: the worker's
// identity from the meta its Registry wrote, falling back on the service id
// and first tag for services registered without it.
func fromEntries(entries []*api.ServiceEntry) []discovery.Registration {
	rs := make([]discovery.Registration, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil {
			continue
		}
		svc := e.Service
		r := discovery.FromMeta(svc.Meta)
		r.Service, r.Address, r.Port = svc.Service, svc.Address, svc.Port
		if r.Address == "" && e.Node != nil {
			// Consul's convention: no service address means the node's.
			r.Address = e.Node.Address
		}
		if r.WorkerID == "" {
			r.WorkerID = svc.ID
		}
		if r.Engine == "" && len(svc.Tags) > 0 {
			r.Engine = svc.Tags[0]
		}
		rs = append(rs, r)
	}
	return rs
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
