package consul

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// Querier is the part of the Consul API a Discoverer uses; *api.Raw
// (client.Raw()) implements it. With ACLs enabled the token needs
// service:read on the service and node:read on the workers' nodes.
type Querier interface {
	Query(endpoint string, out any, q *api.QueryOptions) (*api.QueryMeta, error)
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
//
// With Sharded, the watch is split into filtered blocking queries by the
// owner token's first character (random per vigil run, so the workers
// spread evenly), plus one for registrations without an owner token (left
// out, and logged, as no current vigil's). Every
// change wakes each query, but each answer carries a fifth of the workers
// or less: Consul encodes, and the router decodes, a fraction of the set
// before the change reaches the router, which at 1,000 workers is most of
// the time from a withdrawal to the router dropping the worker.
//
// It reads /v1/health/service through the client's raw query, without
// Consul's passing filter (which only the typed call sets), and keeps the
// workers whose checks all pass itself: so only the fields a registration
// needs are decoded, not every node and check field of every entry.
type Discoverer struct {
	consul  Querier
	service string
	log     hclog.Logger
	filters []string   // one blocking query per filter; "" is unfiltered
	token   *tokenFile // nil: the client's token
}

// ownerShards are Sharded's Consul filters: the owner token is base32
// (crypto/rand.Text), whose alphabet is A-Z and 2-7; the last filter takes
// every other registration, with no owner token among them.
var ownerShards = []string{
	`Service.Meta.owner matches "^[A-H]"`,
	`Service.Meta.owner matches "^[I-P]"`,
	`Service.Meta.owner matches "^[Q-X]"`,
	`Service.Meta.owner matches "^[YZ2-7]"`,
	`Service.Meta.owner not matches "^[A-Z2-7]"`,
}

var _ discovery.Discoverer = (*Discoverer)(nil)

// NewDiscoverer returns a Discoverer of service's workers; log may be nil.
func NewDiscoverer(consul Querier, service string, log hclog.Logger) *Discoverer {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Discoverer{consul: consul, service: service, log: log, filters: []string{""}}
}

// Sharded returns d watching with one filtered blocking query per shard of
// the owner token (see Discoverer). It needs Consul 1.9 or later (the
// filter's matches operator).
func (d *Discoverer) Sharded() *Discoverer {
	s := *d
	s.filters = ownerShards
	return &s
}

// WithTokenFile returns d reading path (CONSUL_HTTP_TOKEN_FILE, which the
// client read once) again after each refusal (403), and sending a new
// token it holds from then on; "" leaves d as it is.
func (d *Discoverer) WithTokenFile(path string) *Discoverer {
	s := *d
	if path != "" {
		s.token = newTokenFile(path)
	}
	return &s
}

func (d *Discoverer) String() string { return "consul service " + d.service }

// Run watches until ctx ends. With shards, update gets the union of every
// shard's last answer once each has answered, and again each time one
// shard's changes; calls never overlap.
func (d *Discoverer) Run(ctx context.Context, update func([]discovery.Registration)) {
	changed := discovery.OnChange(update)
	if len(d.filters) == 1 {
		d.watch(ctx, d.filters[0], changed)
		return
	}
	var (
		mu       sync.Mutex
		last     = make([][]discovery.Registration, len(d.filters))
		answered = make([]bool, len(d.filters))
		wg       sync.WaitGroup
	)
	for i, filter := range d.filters {
		wg.Go(func() {
			d.watch(ctx, filter, func(rs []discovery.Registration) {
				discovery.Sort(rs)
				mu.Lock()
				defer mu.Unlock()
				if answered[i] && slices.Equal(rs, last[i]) {
					// The change was in another shard.
					return
				}
				last[i], answered[i] = rs, true
				if slices.Contains(answered, false) {
					return
				}
				changed(slices.Concat(last...))
			})
		})
	}
	wg.Wait()
}

// watch follows one blocking query with filter until ctx ends, passing
// every answer to answer.
func (d *Discoverer) watch(ctx context.Context, filter string, answer func([]discovery.Registration)) {
	var (
		endpoint = "/v1/health/service/" + url.PathEscape(d.service)
		index    uint64
		failures discovery.Failures
		backoff  = backoffMin
		filtered bool // said once that ACLs hid workers
		skips    discovery.Skips
	)
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: WaitTime, AllowStale: true, Filter: filter, Token: d.token.get()}).WithContext(ctx)
		var entries []*healthEntry
		meta, err := d.consul.Query(endpoint, &entries, q)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			level, msg := hclog.Warn, "consul query failed; keeping the last set of workers"
			if err = denied(err); errors.Is(err, discovery.ErrPermissionDenied) {
				level, msg = hclog.Error, "consul refused the query for want of a permission; fix the token (service:read on the service, node:read on the workers' nodes); keeping the last set of workers"
				d.token.reread() // a rotated token is sent from the next query on
			}
			failures.FailAt(d.log, level, msg, "service", d.service, "filter", filter, "retry_in", backoff, "error", err)
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
				"service", d.service)
		}
		backoff = backoffMin
		// Consul's blocking-query rules: an index that went backwards
		// (a restarted or different server) starts over from 0.
		if meta.LastIndex < index {
			index = 0
		} else {
			index = meta.LastIndex
		}
		answer(fromEntries(entries, func(id string, err error) {
			skips.Skip(d.log, id, err, "service", d.service)
		}))
		skips.Read()
	}
}

// healthEntry is the part of a /v1/health/service entry a registration
// needs (api.ServiceEntry's names).
type healthEntry struct {
	Node *struct {
		Address string
	}
	Service *struct {
		ID, Service, Address string
		Port                 int
		Meta                 map[string]string
	}
	Checks []struct {
		Status string
	}
}

// fromEntries reads registrations from health entries whose checks all
// pass (Consul's ?passing), the worker's identity from the meta its
// Registry wrote; it hands skip the service id of each entry whose meta
// no current vigil wrote, and leaves that entry out.
func fromEntries(entries []*healthEntry, skip func(id string, err error)) []discovery.Registration {
	rs := make([]discovery.Registration, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil || !passing(e) {
			continue
		}
		svc := e.Service
		r, err := discovery.FromMeta(svc.Meta)
		if err != nil {
			skip(svc.ID, err)
			continue
		}
		r.Service, r.Address, r.Port = svc.Service, svc.Address, svc.Port
		if r.Address == "" && e.Node != nil {
			// Consul's convention: no service address means the node's.
			r.Address = e.Node.Address
		}
		rs = append(rs, r)
	}
	return rs
}

// passing reports whether every check of e passes, node checks included.
func passing(e *healthEntry) bool {
	for _, c := range e.Checks {
		if c.Status != api.HealthPassing {
			return false
		}
	}
	return true
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
