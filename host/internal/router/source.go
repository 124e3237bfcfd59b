package router

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

// Endpoint is one worker as discovery publishes it.
type Endpoint struct {
	// ID is the worker id (stable across vigil restarts).
	ID string
	// Addr is the worker endpoint, host:port.
	Addr string
	// Model is the served model name; requests naming it go to this worker.
	Model string
	// Engine is the engine name, e.g. "vllm".
	Engine string
	// InstanceID is the engine's lifetime id; it changes when the engine
	// restarts.
	InstanceID string
}

// Source watches discovery for the workers of one service.
type Source interface {
	// Run calls update with the current set of passing workers as soon as it
	// first has one (possibly empty), then again with the whole new set
	// every time it changes. Calls come from Run's goroutine, one at a time,
	// and update must not keep the slice. Discovery failures are logged and
	// retried, never returned; while they last the last set stands. Run
	// returns when ctx ends.
	Run(ctx context.Context, update func([]Endpoint))
	// String names the source for logs.
	String() string
}

// logEvery is how often a persisting discovery failure is logged again
// after the first: every 10th, so an unreachable Consul does not flood the
// log.
const logEvery = 10

// FilePollInterval is how often a FileSource lists the registry directory.
// Polling keeps the router free of a file-watching dependency (and works on
// filesystems without change notification); 100ms bounds how long a
// withdrawn worker can still be picked, at the cost of a directory read.
const FilePollInterval = 100 * time.Millisecond

// FileSource is a Source over the file registry: it polls file.List and
// reports a set only when it differs from the last one. Records expire on
// their own (file.List skips them), so a worker whose vigil was killed drops
// out one TTL after its last heartbeat.
type FileSource struct {
	dir, service string
	interval     time.Duration
	log          hclog.Logger
}

var _ Source = (*FileSource)(nil)

// NewFileSource returns a FileSource for service's workers under dir.
func NewFileSource(dir, service string, log hclog.Logger) *FileSource {
	return &FileSource{dir: dir, service: service, interval: FilePollInterval, log: orNull(log)}
}

func (s *FileSource) String() string { return "file " + s.dir }

// Run polls every FilePollInterval until ctx ends.
func (s *FileSource) Run(ctx context.Context, update func([]Endpoint)) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	var (
		last     []Endpoint
		sent     bool
		failures int
	)
	for {
		recs, err := file.List(s.dir, s.service, time.Now())
		switch {
		case err != nil:
			failures++
			if failures%logEvery == 1 {
				s.log.Warn("cannot list the file registry; keeping the last set of workers",
					"dir", s.dir, "service", s.service, "failures", failures, "error", err)
			}
		default:
			if failures > 0 {
				s.log.Info("file registry readable again", "dir", s.dir, "failures", failures)
				failures = 0
			}
			eps := fromRecords(recs)
			if !sent || !slices.Equal(eps, last) {
				update(eps)
				last, sent = eps, true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func fromRecords(recs []file.Record) []Endpoint {
	eps := make([]Endpoint, 0, len(recs))
	for _, r := range recs {
		if r.Address == "" || r.Port <= 0 || r.Port > 65535 {
			continue
		}
		eps = append(eps, Endpoint{
			ID:         r.ID,
			Addr:       net.JoinHostPort(r.Address, strconv.Itoa(r.Port)),
			Model:      r.Model,
			Engine:     r.Engine,
			InstanceID: r.InstanceID,
		})
	}
	sortEndpoints(eps)
	return eps
}

// ConsulHealth is the part of the Consul API a ConsulSource uses;
// *api.Health (client.Health()) implements it. With ACLs enabled the token
// needs service:read on the service and node:read on the workers' nodes.
type ConsulHealth interface {
	Service(service, tag string, passingOnly bool, q *api.QueryOptions) ([]*api.ServiceEntry, *api.QueryMeta, error)
}

// ConsulWaitTime bounds one blocking query; Consul answers earlier when the
// set changes.
const ConsulWaitTime = 5 * time.Minute

// consulBackoff is the first and the longest wait before retrying a failed
// query; the wait doubles in between.
const (
	consulBackoffMin = 100 * time.Millisecond
	consulBackoffMax = 2 * time.Second
)

// ConsulSource is a Source over Consul's /v1/health/service endpoint with
// passing-only results, watched with blocking queries: a change reaches the
// router as soon as Consul sees it (a check turning critical, a
// deregistration).
type ConsulSource struct {
	health  ConsulHealth
	service string
	log     hclog.Logger
}

var _ Source = (*ConsulSource)(nil)

// NewConsulSource returns a ConsulSource for service.
func NewConsulSource(health ConsulHealth, service string, log hclog.Logger) *ConsulSource {
	return &ConsulSource{health: health, service: service, log: orNull(log)}
}

func (s *ConsulSource) String() string { return "consul service " + s.service }

// Run watches until ctx ends.
func (s *ConsulSource) Run(ctx context.Context, update func([]Endpoint)) {
	var (
		index    uint64
		last     []Endpoint
		sent     bool
		failures int
		backoff  = consulBackoffMin
	)
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: ConsulWaitTime}).WithContext(ctx)
		entries, meta, err := s.health.Service(s.service, "", true, q)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if failures%logEvery == 1 {
				s.log.Warn("consul query failed; keeping the last set of workers",
					"service", s.service, "failures", failures, "retry_in", backoff, "error", err)
			}
			// A failed query may have lost track of the index (an agent
			// restart resets it); start over with a non-blocking query.
			index = 0
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, consulBackoffMax)
			continue
		}
		if failures > 0 {
			s.log.Info("consul query succeeded again", "service", s.service, "failures", failures)
			failures = 0
		}
		backoff = consulBackoffMin
		// Consul's blocking-query rules: an index that went backwards
		// (a restarted or different server) starts over from 0.
		if meta.LastIndex < index {
			index = 0
		} else {
			index = meta.LastIndex
		}
		eps := fromEntries(entries)
		if !sent || !slices.Equal(eps, last) {
			update(eps)
			last, sent = eps, true
		}
	}
}

func fromEntries(entries []*api.ServiceEntry) []Endpoint {
	eps := make([]Endpoint, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil {
			continue
		}
		svc := e.Service
		addr := svc.Address
		if addr == "" && e.Node != nil {
			// Consul's convention: no service address means the node's.
			addr = e.Node.Address
		}
		if addr == "" || svc.Port <= 0 || svc.Port > 65535 {
			continue
		}
		ep := Endpoint{
			ID:         svc.Meta[discovery.MetaWorkerID],
			Addr:       net.JoinHostPort(addr, strconv.Itoa(svc.Port)),
			Model:      svc.Meta[discovery.MetaModel],
			Engine:     svc.Meta[discovery.MetaEngine],
			InstanceID: svc.Meta[discovery.MetaInstanceID],
		}
		if ep.ID == "" {
			ep.ID = svc.ID
		}
		if ep.Engine == "" && len(svc.Tags) > 0 {
			ep.Engine = svc.Tags[0]
		}
		eps = append(eps, ep)
	}
	sortEndpoints(eps)
	return eps
}

// sortEndpoints orders a set so that equal sets compare equal and the
// round-robin order is stable.
func sortEndpoints(eps []Endpoint) {
	slices.SortFunc(eps, func(a, b Endpoint) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Addr, b.Addr)
	})
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

func orNull(log hclog.Logger) hclog.Logger {
	if log == nil {
		return hclog.NewNullLogger()
	}
	return log
}
