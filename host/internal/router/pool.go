package router

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Pool is the current set of workers and a gRPC connection to each worker
// address. Update replaces the set; Pick chooses a worker for one attempt.
// It is safe for concurrent use.
type Pool struct {
	log hclog.Logger

	mu     sync.Mutex
	eps    []discovery.Registration // current set, in discovery.Sort order
	conns  map[string]*conn         // by address, for the current set
	next   map[string]uint64
	known  bool // Update was called at least once
	closed bool
}

// conn is a connection to one worker address. It is closed once its
// address has left discovery (or the pool closed) and no stream uses it.
type conn struct {
	addr     string
	cc       *grpc.ClientConn
	inflight int  // guarded by Pool.mu
	removed  bool // guarded by Pool.mu
}

// NewPool returns an empty Pool.
func NewPool(log hclog.Logger) *Pool {
	return &Pool{log: orNull(log), conns: map[string]*conn{}, next: map[string]uint64{}}
}

// Update replaces the set of workers with eps, at once: after it returns,
// Pick never returns a worker missing from eps. Connections to new
// addresses are opened; those to departed addresses close when their last
// stream ends. Update after Close does nothing.
func (p *Pool) Update(eps []discovery.Registration) {
	eps = slices.Clone(eps)
	discovery.Sort(eps)
	var toClose []*conn

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	want := map[string]bool{}
	for _, ep := range eps {
		want[ep.Addr()] = true
	}
	for addr, c := range p.conns {
		if !want[addr] {
			delete(p.conns, addr)
			c.removed = true
			if c.inflight == 0 {
				toClose = append(toClose, c)
			}
			p.log.Info("worker left discovery", "addr", addr, "in_flight", c.inflight)
		}
	}
	for _, ep := range eps {
		addr := ep.Addr()
		if _, ok := p.conns[addr]; ok {
			continue
		}
		cc, err := grpc.NewClient("passthrough:///"+addr, append(sdk.StreamDialOptions(),
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithKeepaliveParams(workerKeepalive),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(endpoint.MaxRequestBytes)))...)
		if err != nil {
			// Only a malformed target fails here; leave the worker out.
			p.log.Error("cannot connect to worker; ignoring it", "addr", addr, "worker_id", ep.WorkerID, "error", err)
			continue
		}
		cc.Connect()
		p.conns[addr] = &conn{addr: addr, cc: cc}
		p.log.Info("worker joined", "addr", addr, "worker_id", ep.WorkerID, "model", ep.Model, "engine", ep.Engine)
	}
	p.eps = slices.DeleteFunc(eps, func(ep discovery.Registration) bool { return p.conns[ep.Addr()] == nil })
	p.known = true
	p.mu.Unlock()

	for _, c := range toClose {
		c.cc.Close()
	}
}

// Workers returns the current set of workers.
func (p *Pool) Workers() []discovery.Registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.eps)
}

// Models returns the served model names of the current workers, sorted,
// each once.
func (p *Pool) Models() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var models []string
	for _, ep := range p.eps {
		if ep.Model != "" {
			models = append(models, ep.Model)
		}
	}
	slices.Sort(models)
	return slices.Compact(models)
}

// Ask is what one request needs of a worker.
type Ask struct {
	// Model is the served model name; "" means any model.
	Model string
	// Text: the prompt is text, which token-only workers cannot take.
	Text bool
}

func (a Ask) serves(e discovery.Registration) bool { return a.Model == "" || e.Model == a.Model }

func (a Ask) takes(e discovery.Registration) bool { return a.serves(e) && (!a.Text || !e.TokensOnly) }

// Pick chooses a worker for one attempt of a request: the next one
// round-robin among the current workers that serve ask.Model and take its
// prompt, whose address is not in tried. The caller must call release when
// its stream on the returned connection has ended.
//
// Errors are gRPC statuses: UNAVAILABLE when no worker is known or every
// worker that could take the request was tried, NOT_FOUND when workers are
// known but none serves the model, INVALID_ARGUMENT naming prompt when
// those that serve it take token ids only and the prompt is text.
func (p *Pool) Pick(ask Ask, tried map[string]bool) (ep discovery.Registration, cc *grpc.ClientConn, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.eps) == 0 {
		return discovery.Registration{}, nil, nil, status.Error(codes.Unavailable, "no workers available")
	}
	var serving, taking, untried int
	for _, e := range p.eps {
		switch {
		case !ask.serves(e):
		case !ask.takes(e):
			serving++
		default:
			serving++
			taking++
			if !tried[e.Addr()] {
				untried++
			}
		}
	}
	switch {
	case serving == 0:
		return discovery.Registration{}, nil, nil, status.Errorf(codes.NotFound, "no worker serves model %q", ask.Model)
	case taking == 0:
		return discovery.Registration{}, nil, nil, status.Errorf(codes.InvalidArgument, "prompt: %s take token ids only, not text", workersOf(ask.Model))
	case untried == 0:
		return discovery.Registration{}, nil, nil, status.Errorf(codes.Unavailable, "no %s available: tried all %d", describe(ask.Model), taking)
	}
	// Round-robin per requested model, over the workers not yet tried.
	k := int(p.next[ask.Model] % uint64(untried))
	p.next[ask.Model]++
	for _, e := range p.eps {
		if ask.takes(e) && !tried[e.Addr()] {
			if k == 0 {
				ep = e
				break
			}
			k--
		}
	}
	c := p.conns[ep.Addr()]
	c.inflight++
	var once sync.Once
	return ep, c.cc, func() { once.Do(func() { p.release(c) }) }, nil
}

func (p *Pool) release(c *conn) {
	p.mu.Lock()
	c.inflight--
	closeNow := c.removed && c.inflight == 0
	p.mu.Unlock()
	if closeNow {
		c.cc.Close()
	}
}

// Ready reports whether the pool has a worker set from discovery
// (possibly empty) and how many workers it holds.
func (p *Pool) Ready() (known bool, workers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known, len(p.eps)
}

// Close drops every worker: idle connections close at once, the others
// when their last stream ends. Pick fails with UNAVAILABLE afterwards.
func (p *Pool) Close() {
	var toClose []*conn
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for addr, c := range p.conns {
		delete(p.conns, addr)
		c.removed = true
		if c.inflight == 0 {
			toClose = append(toClose, c)
		}
	}
	p.eps = nil
	p.mu.Unlock()
	for _, c := range toClose {
		c.cc.Close()
	}
}

func workersOf(model string) string {
	if model == "" {
		return "the workers"
	}
	return fmt.Sprintf("the workers of model %q", model)
}

func describe(model string) string {
	if model == "" {
		return "worker"
	}
	return fmt.Sprintf("worker of model %q", model)
}

// workerKeepalive pings a worker connection that has streams open and has
// been silent for Time, and fails those streams when no answer comes within
// Timeout: a frozen worker (its process stopped, its connection open) then
// fails its requests in about 15 s instead of holding them until the
// request timeout. vigil workers permit pings this often
// (endpoint.KeepaliveMinTime); engines are never pinged.
var workerKeepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}

func orNull(log hclog.Logger) hclog.Logger {
	if log == nil {
		return hclog.NewNullLogger()
	}
	return log
}
