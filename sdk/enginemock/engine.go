package enginemock

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// stopGrace bounds how long Stop lets in-flight RPCs finish before cutting
// them off; open health Watch streams never finish on their own.
const stopGrace = time.Second

// Config describes one mock engine: the settings every engine shares and
// the hooks through which the engine-specific side plugs in. The zero value
// is usable: an engine with no health signals and no gRPC services.
type Config struct {
	// Model is the model name the engine reports. Default "mock-model".
	Model string
	// InstanceID is the engine's lifetime id. Default: 16 random hex
	// characters, new for each Engine, as real engines mint a new one each
	// time their process starts.
	InstanceID string
	// StartupDelay is how long after New the engine is not ready: Available
	// and Generate answer UNAVAILABLE, and health derives from a Condition
	// without Ready. It stands in for model loading, during which real
	// engines already listen. Default 0.
	StartupDelay time.Duration
	// TokenDelay is the pause between two messages of one generation.
	// Default 0 (as fast as possible).
	TokenDelay time.Duration
	// StepInterval, when above 0, turns on step mode, which replaces
	// TokenDelay: one ticker for the whole engine, and at every tick each
	// generation in flight gets its next token, as a batching engine's
	// decode step gives one token to every running sequence. A new
	// generation's first token comes at the first step after it arrives (at
	// most one interval later). A generation whose client is slower than the
	// steps falls behind and catches up, as tokens an engine produced wait
	// in its output queue. Default 0: off, each generation has its own timer.
	StepInterval time.Duration
	// TokensPerMessage is how many output tokens each message carries; the
	// last message of a generation may carry fewer. Default 1; values below
	// 1 mean 1. In step mode a message waits for that many steps.
	TokensPerMessage int
	// Signals names the engine's health signals (for grpc.health.v1, its
	// service names), in the order changes to them are published.
	Signals []string
	// Health derives a signal's status from the engine's condition; it is
	// never asked while the engine is stopped (then every signal is
	// NOT_SERVING) nor for a signal pinned through POST /health. Default:
	// SERVING once ready, NOT_SERVING before and while draining.
	Health func(signal string, c Condition) Status
	// Publish, if set, hears of every change to health or to the condition,
	// the initial state included, in order. It runs under the engine's lock:
	// it must not block nor call the Engine.
	Publish func(Change)
	// Register, if set, registers the engine's own gRPC services; New calls
	// it once. Its error is returned by Serve, since New returns none.
	Register func(*grpc.Server) error
	// ServerOptions are options of the engine's gRPC server, such as
	// grpc.KeepaliveParams with MaxConnectionAge to recycle connections as
	// engines behind some proxies do. Default none.
	ServerOptions []grpc.ServerOption
	// Control adds the engine's own POST routes to the control surface, by
	// path; they answer as the kit's own do (an error is 400 and must name
	// the field). They cannot replace the kit's routes.
	Control map[string]func(*http.Request) error
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "mock-model"
	}
	if c.InstanceID == "" {
		c.InstanceID = newInstanceID()
	}
	if c.TokensPerMessage < 1 {
		c.TokensPerMessage = 1
	}
	if c.Health == nil {
		c.Health = func(_ string, c Condition) Status {
			if c.Ready && !c.Draining {
				return healthpb.HealthCheckResponse_SERVING
			}
			return healthpb.HealthCheckResponse_NOT_SERVING
		}
	}
	return c
}

// newInstanceID mints a lifetime id: 16 random hex characters.
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b[:])
}

// Condition is what health derives from: where the engine is in its life,
// and whether it sleeps or has paused generation.
type Condition struct {
	// Ready is set once StartupDelay has passed, unless Stop came first.
	Ready bool
	// Stopped is set by Stop or POST /stop, for good.
	Stopped bool
	// Sleeping and Paused are set and cleared by SetSleeping and SetPaused.
	Sleeping bool
	Paused   bool
	// Draining is set by SetDraining or POST /drain: the engine drains on
	// purpose, as vLLM in its shutdown grace period: its health says so
	// (as the engine's Health derives it) while gRPC serves on, and the
	// generations in flight run on.
	Draining bool
}

// Engine is the engine-independent half of one mock engine. Create it with
// New, serve gRPC with Serve, steer it through Handler, end it with Stop.
type Engine struct {
	cfg      Config
	srv      *grpc.Server
	setupErr error // Register's, reported by Serve
	ready    chan struct{}
	timer    *time.Timer
	stopOnce sync.Once
	stepStop chan struct{} // closed by Stop to end the step ticker
	stamp    atomic.Bool   // output tokens are send times (envStampTokens)

	checkLatency atomic.Int64 // SetCheckLatency's, in nanoseconds

	mu          sync.Mutex
	cond        Condition
	instanceID  string     // Config.InstanceID until Replace
	published   *Condition // the condition Publish last heard of
	publishedID string     // the instance id Publish last heard of
	signals     []string   // Config.Signals, then signals first pinned by POST /health
	status      map[string]Status
	pinned      map[string]bool // set through POST /health; the engine leaves it alone until stopped
	lastChange  int64           // time.Now().UnixNano() of the last health change
	requests    map[string]int
	aborts      map[string]int
	abortSeen   map[string]chan struct{} // Aborted's, closed by the first abort of the id
	reqTotal    int
	abortTotal  int
	streams     map[*stream]struct{}
	hold        *hold
	fail        *fail
	scripts     []Script        // POST /script: the next generations' outputs, the last for all later ones; nil: OutputToken
	lastPrompt  []uint32        // the last request's prompt
	lastMinP    float32         // the last request's min_p
	lastRequest json.RawMessage // RecordRequest's, the last request in its engine's form
}

// New builds an engine, registers the engine's services and publishes the
// initial health (derived without Ready), then starts the StartupDelay timer.
func New(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:        cfg,
		instanceID: cfg.InstanceID,
		srv:        grpc.NewServer(cfg.ServerOptions...),
		ready:      make(chan struct{}),
		signals:    append([]string(nil), cfg.Signals...),
		status:     map[string]Status{},
		pinned:     map[string]bool{},
		requests:   map[string]int{},
		aborts:     map[string]int{},
		abortSeen:  map[string]chan struct{}{},
		streams:    map[*stream]struct{}{},
		stepStop:   make(chan struct{}),
	}
	if cfg.StepInterval > 0 {
		go e.stepLoop(cfg.StepInterval)
	}
	if cfg.Register != nil {
		e.setupErr = cfg.Register(e.srv)
	}
	e.mu.Lock()
	e.applyLocked()
	e.mu.Unlock()
	if cfg.StartupDelay <= 0 {
		e.becomeReady()
	} else {
		e.timer = time.AfterFunc(cfg.StartupDelay, e.becomeReady)
	}
	return e
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Serve serves gRPC on lis until Stop; it returns nil after Stop and closes
// lis. The listener accepts connections at once, before the engine is ready.
func (e *Engine) Serve(lis net.Listener) error {
	if e.setupErr != nil {
		_ = lis.Close()
		return e.setupErr
	}
	err := e.srv.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Ready is closed once StartupDelay has passed, unless Stop came first.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// Stop makes every health signal NOT_SERVING, then stops gRPC gracefully,
// cutting off RPCs still running after a second. It is idempotent and makes
// Serve return nil. Real engines likewise report NOT_SERVING before draining.
func (e *Engine) Stop() {
	e.shutdown()
	e.stopOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			e.srv.GracefulStop()
			close(done)
		}()
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			e.srv.Stop()
			<-done
		}
		close(e.stepStop) // after the streams, which need steps to finish
	})
}

// shutdown is the health half of Stop; POST /stop answers after it.
func (e *Engine) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cond.Stopped {
		return
	}
	e.cond.Stopped = true
	if e.timer != nil {
		e.timer.Stop()
	}
	e.applyLocked()
}

func (e *Engine) becomeReady() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cond.Stopped || e.cond.Ready {
		return
	}
	e.cond.Ready = true
	e.applyLocked()
	close(e.ready)
}

// Condition returns the engine's condition now.
func (e *Engine) Condition() Condition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cond
}

// SetSleeping puts the engine to sleep or wakes it. It refuses new
// generations while asleep and lets those in flight run on; see
// AbortInFlight for engines whose sleep aborts them.
func (e *Engine) SetSleeping(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cond.Sleeping = on
	e.applyLocked()
}

// SetDraining starts (or ends) a drain on purpose: see Condition.Draining.
// Generations in flight run on, and new ones are still taken, as vLLM
// takes them during its grace period; POST /stop ends it.
func (e *Engine) SetDraining(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cond.Draining = on
	e.applyLocked()
}

// SetPaused pauses or resumes generation, as SetSleeping does sleep.
func (e *Engine) SetPaused(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cond.Paused = on
	e.applyLocked()
}

// InstanceID returns the engine's lifetime id now: Config.InstanceID until
// Replace.
func (e *Engine) InstanceID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.instanceID
}

// Replace stands in for the engine process replaced by a new one on the same
// address while connections stay up, as a restart behind a proxy would
// look: the engine takes lifetime id id (a new random one when id is empty),
// and Publish hears of it. It fails after Stop.
func (e *Engine) Replace(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cond.Stopped {
		return errStopped
	}
	if id == "" {
		id = newInstanceID()
	}
	e.instanceID = id
	e.lastChange = time.Now().UnixNano()
	e.publishLocked(nil)
	return nil
}

// Available reports whether the engine can answer an RPC other than health
// and generation: nil once ready, otherwise an UNAVAILABLE status saying why.
func (e *Engine) Available() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unavailableLocked(false)
}

// unavailableLocked says why the engine cannot take an RPC now, if it cannot.
// Generation also needs the engine awake and unpaused.
func (e *Engine) unavailableLocked(generation bool) error {
	switch {
	case e.cond.Stopped:
		return status.Error(codes.Unavailable, "engine is shutting down")
	case !e.cond.Ready:
		return status.Error(codes.Unavailable, "engine is still starting")
	case generation && e.cond.Sleeping:
		return status.Error(codes.Unavailable, "engine is sleeping")
	case generation && e.cond.Paused:
		return status.Error(codes.Unavailable, "generation is paused")
	}
	return nil
}

// State is the engine's observable state, as GET /state reports it.
type State struct {
	Model      string `json:"model"`
	InstanceID string `json:"instance_id"`
	// Health maps each health signal to its status name (SERVING, ...).
	Health   map[string]string `json:"health"`
	Sleeping bool              `json:"sleeping"`
	Paused   bool              `json:"paused"`
	// LastHealthChangeUnixNano is time.Now().UnixNano() taken when a health
	// status last changed, just before Publish heard of it.
	LastHealthChangeUnixNano int64 `json:"last_health_change_unix_nano"`
	// Requests counts generation requests received per request id, including
	// rejected ones; Aborts counts ids named in Abort.
	Requests      map[string]int `json:"requests"`
	Aborts        map[string]int `json:"aborts"`
	RequestsTotal int            `json:"requests_total"`
	AbortsTotal   int            `json:"aborts_total"`
	// InFlight is the number of generations running now.
	InFlight int `json:"in_flight"`
	// LastPrompt is the prompt token ids of the last request received.
	LastPrompt []uint32 `json:"last_prompt"`
	// LastMinP is the min_p of the last request received; 0 when unset.
	LastMinP float32 `json:"last_min_p"`
	// CheckLatency is how late health checks answer (POST /check-latency),
	// as a Go duration; "" when they answer at once.
	CheckLatency string `json:"check_latency"`
	// LastRequest is the last generation request received as its engine's
	// mock recorded it (RecordRequest): the engine's own request message,
	// as protojson, so a test can check every engine field a request set.
	// Absent until one is recorded.
	LastRequest json.RawMessage `json:"last_request,omitempty"`
}

// RecordRequest keeps req, a generation request in its engine's own
// message, as State.LastRequest: compact protojson, exactly the fields the
// request set (compacted, since protojson varies its spacing from build to
// build). Engine mocks call it for every request they receive, refused
// ones included.
func (e *Engine) RecordRequest(req proto.Message) {
	var b bytes.Buffer
	raw, err := protojson.Marshal(req)
	if err == nil {
		err = json.Compact(&b, raw)
	}
	if err != nil {
		b.Reset()
		b.WriteString(strconv.Quote(err.Error())) // a message always marshals: never seen
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastRequest = b.Bytes()
}

// State returns a snapshot of the engine's state.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := State{
		Model:                    e.cfg.Model,
		InstanceID:               e.instanceID,
		Health:                   make(map[string]string, len(e.status)),
		Sleeping:                 e.cond.Sleeping,
		Paused:                   e.cond.Paused,
		LastHealthChangeUnixNano: e.lastChange,
		Requests:                 make(map[string]int, len(e.requests)),
		Aborts:                   make(map[string]int, len(e.aborts)),
		RequestsTotal:            e.reqTotal,
		AbortsTotal:              e.abortTotal,
		InFlight:                 len(e.streams),
		LastPrompt:               append([]uint32(nil), e.lastPrompt...),
		LastMinP:                 e.lastMinP,
		LastRequest:              append(json.RawMessage(nil), e.lastRequest...),
	}
	if d := time.Duration(e.checkLatency.Load()); d > 0 {
		s.CheckLatency = d.String()
	}
	for k, v := range e.status {
		s.Health[k] = v.String()
	}
	for k, v := range e.requests {
		s.Requests[k] = v
	}
	for k, v := range e.aborts {
		s.Aborts[k] = v
	}
	return s
}
