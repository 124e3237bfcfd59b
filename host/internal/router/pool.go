package router

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// DefaultModelMemory is how long a model stays known after its last worker
// left discovery: long enough for an engine to sleep and wake, or to be
// restarted, short enough that a model taken out of service is soon
// reported as unknown.
const DefaultModelMemory = 10 * time.Minute

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Models are served model names known even while no worker serves
	// them (vigil route --model): their requests then get UNAVAILABLE, as a
	// model seen in discovery within Memory does, not NOT_FOUND.
	Models []string
	// Memory is how long a model stays known after its last worker left
	// discovery; 0 means DefaultModelMemory.
	Memory time.Duration
	// Now is the clock of Memory; nil means time.Now.
	Now func() time.Time
	// Logger receives a line per worker joining or leaving, and per model
	// withdrawn or forgotten; nil discards.
	Logger hclog.Logger
	// Credentials secure the connections to workers (vigil route
	// --worker-tls); nil means plaintext.
	Credentials credentials.TransportCredentials
	// Balance is how Pick chooses among the workers that can take a
	// request; "" means PeakEWMA.
	Balance Balance
	// Rand is the random source of the two choices, used under the pool's
	// lock; nil means one seeded at random.
	Rand *rand.Rand
	// Decay is PeakEWMA's decay time: how fast a worker's time to first
	// message is forgotten; 0 means DefaultDecay.
	Decay time.Duration
}

// DefaultDecay is PeakEWMA's decay time. Finagle and Linkerd take 10 s
// for request latencies; a worker's time to first token is measured on
// every request, tens to hundreds a second, and at 10 s one slow answer
// (a scheduling hiccup) would make a fast worker look as slow as a slow
// one for seconds. At 1 s a fast worker's hiccup is forgotten within a
// second or two, and a slow one is tried again about once a second.
const DefaultDecay = time.Second

// Balance is a way of choosing among the workers that can take a request
// (vigil route --balance).
type Balance string

const (
	// PeakEWMA takes three distinct workers at random and chooses the one
	// of lowest cost, a tie broken at random: the cost is the worker's time to
	// first message as a moving average that jumps to any slower
	// observation at once (the peak) and decays toward 0 with Decay, times
	// its requests outstanding plus one, as Finagle's and Linkerd's peak
	// EWMA balancers do. A worker with requests outstanding and no time
	// measured yet costs the most, so a new worker gets one request, not a
	// burst, until its first answer. Attempts that end with no message
	// count only as a peak, and those that fail by the worker's fault (an
	// error, an answer without a token) as a penalty of 30 s
	// (failurePenalty): failing fast never makes a worker look fast.
	PeakEWMA Balance = "peak-ewma"
	// LeastOutstanding takes two distinct workers at random and chooses the
	// one with fewer requests outstanding (picked and not yet ended), a
	// tie broken at random: the power of two choices, which keeps slow
	// workers from piling up requests without scanning every worker's load.
	LeastOutstanding Balance = "least-outstanding"
	// RoundRobin takes the workers in turn, whatever their load.
	RoundRobin Balance = "round-robin"
)

// Balances are the valid Balance values, the default first.
var Balances = []Balance{PeakEWMA, LeastOutstanding, RoundRobin}

// Pool is the current set of workers and a gRPC connection to each worker
// address. Update replaces the set; Pick chooses a worker for one attempt.
// It also decides whether the router can route (Serving), which both
// health APIs report. It is safe for concurrent use.
type Pool struct {
	log     hclog.Logger
	now     func() time.Time
	memory  time.Duration
	pinned  map[string]bool // PoolConfig.Models
	creds   credentials.TransportCredentials
	balance Balance
	decay   float64 // PeakEWMA's, in ns

	mu       sync.Mutex
	rand     *rand.Rand
	eps      []discovery.Registration // current set, in discovery.Sort order
	all      []worker                 // eps with their addresses and connections
	byModel  map[string][]worker      // all by served model name
	conns    map[string]*conn         // by address, for the current set
	next     map[string]uint64
	left     map[string]time.Time // model -> when its last worker left discovery
	seen     map[string]time.Time // model -> when it was first seen, until forgotten
	known    bool                 // Update was called at least once
	closed   bool
	serving  bool
	watchers []func(serving bool)

	// stale are entries whose address answers as another worker
	// (Quarantine), as discovery listed them: Pick passes them over until
	// discovery changes or drops them.
	stale map[discovery.Registration]bool
	// caps are the capability sets of the current workers, by encoding:
	// each read once, shared by the workers that publish it.
	caps map[discovery.Capabilities]*capSet
	// pickable is PickLease's scratch: the indices, in its worker list, of
	// the workers it may pick.
	pickable []int
}

// worker is one of the current workers as Pick needs it: its address
// computed once, not on every Pick.
type worker struct {
	ep    discovery.Registration
	addr  string
	c     *conn
	stale bool    // quarantined: never picked
	caps  *capSet // ep.Caps as Pick matches them
}

// conn is a connection to one worker address. It is closed once its
// address has left discovery (or the pool closed) and no stream uses it.
type conn struct {
	addr     string
	cc       *grpc.ClientConn
	inflight int  // requests outstanding: picked, not released; guarded by Pool.mu
	removed  bool // guarded by Pool.mu
	tls      *tlsState
	// ewma is the peak EWMA of the time to first message, in ns, as of
	// stamp; guarded by Pool.mu.
	ewma  float64
	stamp time.Time
}

// peakEWMAChoices is how many workers PeakEWMA compares. With two, as
// least outstanding takes, a fleet with one slow worker in ten puts both
// choices on slow workers in 0.8% of picks, enough to set the p99 time to
// first token; with three, 0.04%.
const peakEWMAChoices = 3

// costPenalty is the cost of a worker with requests outstanding and no
// time measured yet (Finagle's penalty): above any measured cost.
const costPenalty = math.MaxInt64 >> 16

// observe adds rtt (ns) to the peak EWMA at now: a slower time replaces it,
// a faster one is averaged in with a weight growing with the time since
// the last observation.
func (c *conn) observe(now time.Time, rtt, decay float64) {
	w := math.Exp(-float64(max(0, now.Sub(c.stamp))) / decay)
	if rtt > c.ewma {
		c.ewma = rtt
	} else {
		c.ewma = c.ewma*w + rtt*(1-w)
	}
	c.stamp = now
}

// cost is PeakEWMA's load of c at now: the EWMA decayed to now times the
// requests outstanding plus one.
func (c *conn) cost(now time.Time, decay float64) float64 {
	c.observe(now, 0, decay)
	if c.ewma == 0 && c.inflight > 0 {
		return costPenalty
	}
	return c.ewma * float64(c.inflight+1)
}

// NewPool returns an empty Pool, which knows no worker until Update.
func NewPool(cfg PoolConfig) *Pool {
	p := &Pool{log: orNull(cfg.Logger), now: cfg.Now, memory: cfg.Memory, pinned: map[string]bool{},
		conns: map[string]*conn{}, next: map[string]uint64{}, left: map[string]time.Time{}, seen: map[string]time.Time{},
		stale:   map[discovery.Registration]bool{},
		balance: cfg.Balance, decay: float64(cfg.Decay), rand: cfg.Rand}
	if p.balance == "" {
		p.balance = PeakEWMA
	}
	if p.decay <= 0 {
		p.decay = float64(DefaultDecay)
	}
	if p.rand == nil {
		p.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.creds = cfg.Credentials; p.creds == nil {
		p.creds = insecure.NewCredentials()
	}
	if p.memory <= 0 {
		p.memory = DefaultModelMemory
	}
	for _, m := range cfg.Models {
		p.pinned[m] = true
	}
	return p
}

// Update replaces the set of workers with eps, at once: after it returns,
// Pick never returns a worker missing from eps. Departed workers are
// dropped first, before the connections to new addresses are opened
// (outside the lock, so Pick goes on meanwhile); those to departed
// addresses close when their last stream ends. Update after Close does
// nothing. Updates are meant to come from one discoverer, in order.
func (p *Pool) Update(eps []discovery.Registration) {
	eps = slices.Clone(eps)
	discovery.Sort(eps)
	fresh, open := p.drop(eps)
	if !open || len(fresh) == 0 {
		return
	}
	p.adopt(eps, fresh, p.dial(fresh))
}

// drop is Update's first step: it removes the workers whose address is
// missing from eps (closing their idle connections) and returns the
// workers of eps at an address with no connection yet; open is false once
// the pool is closed.
func (p *Pool) drop(eps []discovery.Registration) (fresh []discovery.Registration, open bool) {
	want := make(map[string]bool, len(eps))
	for _, ep := range eps {
		want[ep.Addr()] = true
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false
	}
	var toClose []*conn
	removed := false
	for addr, c := range p.conns {
		if !want[addr] {
			removed = true
			delete(p.conns, addr)
			c.removed = true
			if c.inflight == 0 {
				toClose = append(toClose, c)
			}
			p.log.Info("worker left discovery", "addr", addr, "in_flight", c.inflight)
		}
	}
	for _, ep := range eps {
		if p.conns[ep.Addr()] == nil {
			fresh = append(fresh, ep)
		}
	}
	if removed || len(fresh) == 0 {
		// Apply the removals (and any change of a kept worker) now.
		p.apply(slices.DeleteFunc(slices.Clone(eps), func(ep discovery.Registration) bool { return p.conns[ep.Addr()] == nil }))
	}
	p.mu.Unlock()
	for _, c := range toClose {
		c.cc.Close()
	}
	return fresh, true
}

// dial opens a connection to each address of fresh, without the pool's
// lock: connecting must not hold up Pick. A worker whose target is
// malformed is logged and left out.
func (p *Pool) dial(fresh []discovery.Registration) map[string]*conn {
	opened := map[string]*conn{}
	for _, ep := range fresh {
		addr := ep.Addr()
		if opened[addr] != nil {
			continue
		}
		st := &tlsState{addr: addr, log: p.log}
		cc, err := grpc.NewClient("passthrough:///"+addr, append(workerapi.DialOptions(),
			grpc.WithTransportCredentials(watchTLS(p.creds, st)), grpc.WithKeepaliveParams(workerKeepalive))...)
		if err != nil {
			// Only a malformed target fails here; leave the worker out.
			p.log.Error("cannot connect to worker; ignoring it", "addr", addr, "worker_id", ep.WorkerID, "error", err)
			continue
		}
		cc.Connect()
		opened[addr] = &conn{addr: addr, cc: cc, tls: st}
	}
	return opened
}

// adopt is Update's last step: it makes eps the current set with the
// connections opened for fresh. A connection the pool no longer needs (it
// closed, or another Update connected the address meanwhile) is closed.
func (p *Pool) adopt(eps, fresh []discovery.Registration, opened map[string]*conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		for _, c := range opened {
			c.cc.Close()
		}
		return
	}
	var spare []*conn // opened for an address another Update connected meanwhile
	for _, ep := range fresh {
		addr := ep.Addr()
		c := opened[addr]
		if c == nil {
			continue
		}
		delete(opened, addr)
		if p.conns[addr] != nil {
			spare = append(spare, c)
			continue
		}
		p.conns[addr] = c
		p.log.Info("worker joined", "addr", addr, "worker_id", ep.WorkerID, "model", ep.Model, "engine", ep.Engine)
	}
	p.apply(slices.DeleteFunc(eps, func(ep discovery.Registration) bool { return p.conns[ep.Addr()] == nil }))
	p.mu.Unlock()
	for _, c := range spare {
		c.cc.Close()
	}
}

// apply makes eps, whose addresses all have connections, the current set.
// The caller holds p.mu.
func (p *Pool) apply(eps []discovery.Registration) {
	before := modelSet(p.eps)
	p.eps = eps
	// A quarantined entry that discovery changed or dropped is free again.
	kept := map[discovery.Registration]bool{}
	for _, ep := range eps {
		if p.stale[ep] {
			kept[ep] = true
		}
	}
	p.stale = kept
	p.index()
	p.known = true
	p.remember(before, modelSet(p.eps))
	p.setServing()
}

// index rebuilds all and byModel from eps, and the capability sets they
// use. The caller holds p.mu.
func (p *Pool) index() {
	p.all = make([]worker, 0, len(p.eps))
	p.byModel = map[string][]worker{}
	caps := map[discovery.Capabilities]*capSet{}
	for _, ep := range p.eps {
		w := worker{ep: ep, addr: ep.Addr(), stale: p.stale[ep]}
		w.c = p.conns[w.addr]
		if w.caps = caps[ep.Caps]; w.caps == nil {
			if w.caps = p.caps[ep.Caps]; w.caps == nil {
				w.caps = newCapSet(ep.Caps)
			}
			caps[ep.Caps] = w.caps
		}
		p.all = append(p.all, w)
		p.byModel[ep.Model] = append(p.byModel[ep.Model], w)
	}
	p.caps = caps
}

// remember notes when each model of before that is missing from after
// lost its last worker, and forgets models gone for longer than the
// memory. The caller holds p.mu.
func (p *Pool) remember(before, after map[string]bool) {
	now := p.now()
	for m := range after {
		delete(p.left, m)
		if _, ok := p.seen[m]; !ok {
			p.seen[m] = now
		}
	}
	for m := range before {
		if !after[m] {
			p.left[m] = now
			p.log.Info("model has no worker now; its requests get UNAVAILABLE (HTTP 503) until one returns", "model", m,
				"remembered_for", p.memory, "pinned", p.pinned[m])
		}
	}
	for m, at := range p.left {
		if now.Sub(at) > p.memory {
			delete(p.left, m)
			delete(p.seen, m)
			if !p.pinned[m] {
				p.log.Info("model forgotten: no worker served it within the memory; its requests get NOT_FOUND (HTTP 404)", "model", m, "memory", p.memory)
			}
		}
	}
}

// Quarantine stops Pick from choosing ep, a current entry whose address
// answered as the worker answering (workerapi.ReasonWorkerMismatch): the
// worker ep names died without withdrawing and another holds its address.
// It holds until discovery changes the entry or drops it; the first call
// for an entry logs it at WARN.
func (p *Pool) Quarantine(ep discovery.Registration, answering string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale[ep] || !slices.Contains(p.eps, ep) {
		return
	}
	p.stale[ep] = true
	p.index()
	p.log.Warn("a worker's address answers as another worker: the entry is stale (its worker died without withdrawing); no request goes to it until discovery changes or drops it",
		"worker_id", ep.WorkerID, "answering_worker_id", answering, "addr", ep.Addr(), "model", ep.Model)
}

// modelSet is the served model names of eps.
func modelSet(eps []discovery.Registration) map[string]bool {
	set := map[string]bool{}
	for _, ep := range eps {
		if ep.Model != "" {
			set[ep.Model] = true
		}
	}
	return set
}

// Serving reports whether the router can route: discovery has answered,
// with at least one worker, and the pool is open. The router's HTTP
// GET /health and its grpc.health.v1 service both report it.
func (p *Pool) Serving() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serving
}

// WatchServing calls f with Serving now and then each time it changes, in
// order, under the pool's lock: f must not call the Pool.
func (p *Pool) WatchServing(f func(serving bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchers = append(p.watchers, f)
	f(p.serving)
}

// setServing recomputes Serving and tells the watchers of a change. The
// caller holds p.mu.
func (p *Pool) setServing() {
	serving := p.known && !p.closed && len(p.eps) > 0
	if serving == p.serving {
		return
	}
	p.serving = serving
	p.log.Info("router serving status changed", "serving", serving, "workers", len(p.eps))
	for _, f := range p.watchers {
		f(serving)
	}
}

// Workers returns the current set of workers but the quarantined
// (Quarantine): those the router can route to.
func (p *Pool) Workers() []discovery.Registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	eps := make([]discovery.Registration, 0, len(p.all))
	for _, w := range p.all {
		if !w.stale {
			eps = append(eps, w.ep)
		}
	}
	return eps
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

// ModelInfo is one served model as GET /v1/models lists it.
type ModelInfo struct {
	// ID is the served model name.
	ID string
	// Created is when the pool first saw a worker of the model (since it
	// was last forgotten).
	Created time.Time
	// MaxModelLen is the model's maximum length in tokens, the largest its
	// current workers publish; 0 when none does.
	MaxModelLen uint32
}

// ModelInfos returns the models of the current workers, sorted by name.
func (p *Pool) ModelInfos() []ModelInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	var infos []ModelInfo
	for _, name := range slices.Sorted(maps.Keys(p.byModel)) {
		if name == "" {
			continue
		}
		info := ModelInfo{ID: name, Created: p.seen[name]}
		for _, w := range p.byModel[name] {
			info.MaxModelLen = max(info.MaxModelLen, w.ep.MaxModelLen)
		}
		infos = append(infos, info)
	}
	return infos
}

// Ask is what one request needs of a worker.
type Ask struct {
	// Model is the served model name; "" means any model.
	Model string
	// ModelID, when not "", is the model's id as well (discovery's
	// ModelID): a resumed stream's ids mean the same only to its
	// tokenizer.
	ModelID string
	// Text: the prompt is text, which token-only workers cannot take.
	Text bool
	// Messages: the prompt is chat messages, which only workers with a chat
	// template take (Registration.Chat).
	Messages bool
	// Needs are what the request asks beyond the basic request, in
	// parameter order: only workers whose capabilities meet them all take
	// it (needsOf).
	Needs []discovery.Need
	// Kind is the request's kind: a generation (the zero Kind), which
	// workers of an embedding model do not take, an embedding, which only
	// they take, or either (Tokenize).
	Kind AskKind
}

// AskKind is the kind of request an Ask is for.
type AskKind int

// The kinds of request.
const (
	// KindGenerate: Generate, for workers of a generation model.
	KindGenerate AskKind = iota
	// KindEmbed: Embed, for workers of an embedding model (capability
	// embed).
	KindEmbed
	// KindAny: any worker of the model (Tokenize, Detokenize).
	KindAny
)

// takes reports whether a worker of caps takes the kind.
func (k AskKind) takes(caps *capSet) bool {
	switch k {
	case KindGenerate:
		return !caps.embed
	case KindEmbed:
		return caps.embed
	}
	return true
}

// prompt reports whether e takes the ask's kind of prompt.
func (a Ask) prompt(e discovery.Registration) bool {
	switch {
	case a.Messages:
		return e.Chat
	case a.Text:
		return !e.TokensOnly
	}
	return true
}

// Pick chooses a worker for one attempt of a request among the current
// workers that serve ask.Model and take its prompt and needs, whose address is not
// in tried: with PeakEWMA (the default) the cheapest of three chosen at
// random, with LeastOutstanding the less loaded of two, with RoundRobin the
// next in turn. The returned worker's outstanding count holds from Pick
// until release: the caller must call release when its stream on the
// returned connection has ended. Pick is PickLease with no time to first
// message measured: the attempt counts only as a peak.
//
// Errors are gRPC statuses:
//   - UNAVAILABLE when no worker serves the model now but it is known (a
//     worker served it within the memory, or it is pinned with
//     PoolConfig.Models), when no worker is known at all (discovery has not
//     answered, or lists none: nothing tells an unknown model from one
//     whose workers are all away), or when every worker that could take
//     the request was tried;
//   - NOT_FOUND when workers are known but none serves the model, nor did
//     within the memory;
//   - INVALID_ARGUMENT naming prompt when those that serve it take token
//     ids only and the prompt is text, or naming messages when none of
//     them has a chat template and the prompt is chat messages;
//   - an *UnmetError (INVALID_ARGUMENT naming the field) when none of
//     those that take the prompt meets ask.Needs: the first need, in
//     their order, that some worker lacks.
func (p *Pool) Pick(ask Ask, tried map[string]bool) (ep discovery.Registration, cc *grpc.ClientConn, release func(), err error) {
	ep, cc, l, err := p.PickLease(ask, tried)
	if err != nil {
		return ep, cc, nil, err
	}
	return ep, cc, l.Release, nil
}

// Lease is one attempt's hold on a worker picked by PickLease. Its methods
// are safe for concurrent use.
type Lease struct {
	p     *Pool
	c     *conn
	start time.Time
	// first, failed and done are guarded by Pool.mu.
	first, failed, done bool
}

// failurePenalty is the time to first message an attempt that failed by
// the worker's fault counts as (Lease.Failed): a peak, which then decays
// with Decay like any other. A failing worker would otherwise look the
// cheapest, answering at once (ingress-nginx #5540). A penalty sample,
// rather than Envoy's outlier ejection (5 consecutive 5xx, then out for
// 30 s and more) or a separate success-rate factor (ingress-nginx PR
// #9882, which leaves a worker that never succeeded at a cost of 0), keeps
// one cost and one decay: a failing worker gets a probe about every
// Decay x ln(failurePenalty / healthy cost), 8 s against a 5 ms worker,
// sooner as the others load up, and is back at once when it recovers. It
// is above the times to first token of healthy workers, a long prefill's
// included, and below load balancers' 60 s timeouts.
const failurePenalty = float64(30 * time.Second)

// Failed records that the attempt failed by the worker's fault (an error,
// an empty answer; not the client's cancel nor a bad request): at Release
// it counts as failurePenalty, whatever its first message's time.
func (l *Lease) Failed() {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.failed = true
}

// FirstMessage records that the worker's first message arrived now: its
// time from the pick feeds PeakEWMA's cost. Later calls, and calls after
// Release, do nothing.
func (l *Lease) FirstMessage() {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.first || l.done {
		return
	}
	l.first = true
	now := l.p.now()
	l.c.observe(now, float64(now.Sub(l.start)), l.p.decay)
}

// Release ends the attempt's hold; later calls do nothing. After Failed
// the attempt counts as failurePenalty; without FirstMessage, its time
// counts as a peak only.
func (l *Lease) Release() {
	l.p.mu.Lock()
	if l.done {
		l.p.mu.Unlock()
		return
	}
	l.done = true
	now := l.p.now()
	switch {
	case l.failed:
		l.c.observe(now, max(failurePenalty, float64(now.Sub(l.start))), l.p.decay)
	case !l.first && float64(now.Sub(l.start)) > l.c.ewma:
		l.c.observe(now, float64(now.Sub(l.start)), l.p.decay)
	}
	c := l.c
	c.inflight--
	closeNow := c.removed && c.inflight == 0
	l.p.mu.Unlock()
	if closeNow {
		c.cc.Close()
	}
}

// PickLease is Pick with a Lease in place of release: the caller calls
// FirstMessage when the worker's first message arrives and Release when
// its stream has ended.
func (p *Pool) PickLease(ask Ask, tried map[string]bool) (ep discovery.Registration, cc *grpc.ClientConn, lease *Lease, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.known {
		return discovery.Registration{}, nil, nil, status.Error(codes.Unavailable, "no workers available")
	}
	ws := p.all
	if ask.Model != "" {
		ws = p.byModel[ask.Model]
	}
	untried, err := p.untried(ask, ws, tried)
	if err != nil {
		return discovery.Registration{}, nil, nil, err
	}
	var w *worker
	now := p.now()
	if p.balance == RoundRobin {
		// Round-robin per requested model, over the workers not yet tried.
		w = &ws[p.pickable[p.next[ask.Model]%uint64(untried)]]
		p.next[ask.Model]++
	} else {
		w = p.draw(ws, untried, now)
	}
	c := w.c
	c.inflight++
	return w.ep, c.cc, &Lease{p: p, c: c, start: now}, nil
}

// untried counts the workers of ws that take ask (its prompt and needs)
// and are not in tried, their indices in p.pickable, or returns Pick's
// error when there is none. The caller holds p.mu.
func (p *Pool) untried(ask Ask, ws []worker, tried map[string]bool) (int, error) {
	var taking, capable, stale, otherKind int
	unmet := len(ask.Needs)
	p.pickable = p.pickable[:0]
	var memo capMemo
	for i := range ws {
		switch {
		case !ask.Kind.takes(ws[i].caps):
			otherKind++
		case !ask.prompt(ws[i].ep), ask.ModelID != "" && ws[i].ep.ModelID != ask.ModelID:
		case ws[i].stale:
			stale++
		default:
			taking++
			if m := memo.missing(ws[i].caps, ask.Needs); m >= 0 {
				unmet = min(unmet, m)
				continue
			}
			capable++
			if !tried[ws[i].addr] {
				p.pickable = append(p.pickable, i)
			}
		}
	}
	untried := len(p.pickable)
	if taking > 0 && capable == 0 {
		// The need listed first that some worker lacks: the same answer
		// whichever worker the request would have gone to.
		return 0, &UnmetError{Model: ask.Model, Need: ask.Needs[unmet]}
	}
	switch {
	case len(ws) == 0:
		return 0, p.noWorker(ask.Model)
	case taking == 0 && stale > 0:
		return 0, status.Errorf(codes.Unavailable, "no %s available: the %d entries discovery lists are stale (their addresses answer as other workers); retry later",
			describe(ask.Model), stale)
	case taking == 0 && otherKind > 0 && ask.Kind == KindEmbed:
		return 0, errNoEmbeddings(ask.Model)
	case taking == 0 && otherKind > 0:
		return 0, errEmbeddingOnly(ask.Model)
	case taking == 0 && ask.Messages:
		return 0, status.Errorf(codes.InvalidArgument,
			"messages: %s have no chat template loaded, so they take no chat messages; start their vigil run with "+
				"--tokenizer-dir or --chat-template, or send a prompt to /v1/completions", workersOf(ask.Model))
	case taking == 0:
		return 0, status.Errorf(codes.InvalidArgument, "prompt: %s take token ids only, not text", workersOf(ask.Model))
	case untried == 0:
		return 0, status.Errorf(codes.Unavailable, "no %s available: tried all %d", describe(ask.Model), capable)
	}
	return untried, nil
}

// draw is the random balances' choice among the untried eligible workers
// of ws (p.pickable, untried of them): distinct workers drawn at random (three for PeakEWMA, two for
// LeastOutstanding), the least loaded wins, a tie at random. The caller
// holds p.mu.
func (p *Pool) draw(ws []worker, untried int, now time.Time) *worker {
	k := min(untried, 2)
	if p.balance == PeakEWMA {
		k = min(untried, peakEWMAChoices)
	}
	var w *worker
	var drawn [peakEWMAChoices]int // in ascending order
	var best float64
	ties := 0
	for n := range k {
		// j in [0, untried-n), moved past those drawn, is distinct.
		j := p.rand.IntN(untried - n)
		at := 0
		for ; at < n && j >= drawn[at]; at++ {
			j++
		}
		copy(drawn[at+1:n+1], drawn[at:n])
		drawn[at] = j
		v := &ws[p.pickable[j]]
		load := float64(v.c.inflight)
		if p.balance == PeakEWMA {
			load = v.c.cost(now, p.decay)
		}
		switch {
		case n == 0 || load < best:
			w, best, ties = v, load, 1
		case load == best:
			if ties++; p.rand.IntN(ties) == 0 {
				w = v
			}
		}
	}
	return w
}

// noWorker is Pick's error for a model no current worker serves. The
// caller holds p.mu.
func (p *Pool) noWorker(model string) error {
	left, seen := p.left[model]
	since := p.now().Sub(left)
	switch {
	case p.pinned[model]:
		return status.Errorf(codes.Unavailable, "no worker of model %q serves now (a model given with --model); retry later", model)
	case seen && since <= p.memory:
		return status.Errorf(codes.Unavailable, "no worker of model %q serves now (its last worker left discovery %s ago); retry later",
			model, since.Round(time.Second))
	case len(p.eps) == 0:
		return status.Error(codes.Unavailable, "no workers available")
	}
	return status.Errorf(codes.NotFound, "no worker serves model %q, nor did one in the last %s", model, p.memory)
}

// Ready reports whether the router can route (Serving) and how many
// workers it holds.
func (p *Pool) Ready() (serving bool, workers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serving, len(p.eps)
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
	p.index()
	p.setServing()
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
// (workerapi.KeepaliveMinTime); engines are never pinged.
var workerKeepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}

func orNull(log hclog.Logger) hclog.Logger {
	if log == nil {
		return hclog.NewNullLogger()
	}
	return log
}
