// Package mock provides a stand-in vLLM engine for tests: a real gRPC server
// speaking vLLM's vllm.Inference and vllm.Control services and
// grpc.health.v1.Health, plus a JSON control surface over HTTP (see
// [Engine.Handler]) that flips health, sleeps, pauses, holds and fails streams.
// Generation is deterministic (see [OutputToken]), so tests can predict every
// token. Behaviour follows vLLM's gRPC server (vllm-project/vllm) after
// v0.33.0: "vllm.Inference" follows readiness, "" only liveness.
package mock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
)

// Health service names vLLM registers: the whole server, and one per service.
var (
	serviceServer    = ""
	serviceControl   = vllmpb.Control_ServiceDesc.ServiceName
	serviceInference = vllmpb.Inference_ServiceDesc.ServiceName
	engineServices   = []string{serviceServer, serviceControl, serviceInference}
)

// stopGrace bounds how long Stop lets in-flight RPCs finish before cutting
// them off; open health Watch streams never finish on their own.
const stopGrace = time.Second

// Config describes one mock engine. The zero value is usable.
type Config struct {
	// Model is reported as model_id and served_model_name. Default "mock-model".
	Model string
	// InstanceID is ServerInfo.instance_id, the engine's lifetime id.
	// Default: 16 random hex characters, new for each Engine, as vLLM mints
	// a new one each time an engine process starts.
	InstanceID string
	// StartupDelay is how long after New every health service stays
	// NOT_SERVING and Control and Inference answer UNAVAILABLE; it stands in
	// for model loading, during which vLLM already listens. Default 0.
	StartupDelay time.Duration
	// EngineVersion is ServerInfo.engine_version. Default "0.33.0-mock".
	EngineVersion string
	// MaxModelLen is ServerInfo.max_model_len, in tokens. Default 4096.
	MaxModelLen uint32
	// KVBlockSize is ServerInfo.kv_block_size, in tokens per block. Default 16.
	KVBlockSize uint32
	// TokenDelay is the pause between two messages of one generation.
	// Default 0 (as fast as possible); the vllm-mock command uses 10ms.
	TokenDelay time.Duration
	// TokensPerMessage is how many output tokens each message carries; the
	// last message of a sequence may carry fewer. Default 1; values below 1
	// mean 1.
	TokensPerMessage int
	// WatchMode selects how Health/Watch behaves. Default WatchNormal.
	WatchMode WatchMode
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "mock-model"
	}
	if c.InstanceID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
		c.InstanceID = hex.EncodeToString(b[:])
	}
	if c.EngineVersion == "" {
		c.EngineVersion = "0.33.0-mock"
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = 4096
	}
	if c.KVBlockSize == 0 {
		c.KVBlockSize = 16
	}
	if c.TokensPerMessage < 1 {
		c.TokensPerMessage = 1
	}
	if c.WatchMode == "" {
		c.WatchMode = WatchNormal
	}
	return c
}

// Engine is one mock vLLM engine. Create it with New, serve gRPC with Serve,
// steer it through Handler, end it with Stop.
type Engine struct {
	cfg      Config
	srv      *grpc.Server
	health   *health.Server
	setupErr error // reported by Serve: New cannot return errors
	ready    chan struct{}
	timer    *time.Timer
	stopOnce sync.Once

	mu         sync.Mutex
	isReady    bool
	stopped    bool
	sleeping   bool
	paused     bool
	status     map[string]healthpb.HealthCheckResponse_ServingStatus
	manual     map[string]bool // set through POST /health; the engine leaves it alone until stopped
	lastChange int64           // time.Now().UnixNano() of the last health change
	requests   map[string]int
	aborts     map[string]int
	reqTotal   int
	abortTotal int
	streams    map[*stream]struct{}
	hold       *hold
	fail       *fail
}

// New builds an engine and starts its StartupDelay timer. All health
// services start NOT_SERVING and turn SERVING once the delay has passed.
func New(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:      cfg,
		srv:      grpc.NewServer(),
		health:   health.NewServer(),
		ready:    make(chan struct{}),
		status:   map[string]healthpb.HealthCheckResponse_ServingStatus{},
		manual:   map[string]bool{},
		requests: map[string]int{},
		aborts:   map[string]int{},
		streams:  map[*stream]struct{}{},
	}
	hs, err := healthServer(cfg.WatchMode, e.health)
	if err != nil {
		e.setupErr = err
		hs = e.health
	}
	healthgrpc.RegisterHealthServer(e.srv, hs)
	vllmpb.RegisterInferenceServer(e.srv, &inferenceServer{e: e})
	vllmpb.RegisterControlServer(e.srv, &controlServer{e: e})

	e.mu.Lock()
	e.applyLocked() // grpc-go's health server starts "" SERVING; vLLM starts NOT_SERVING
	e.mu.Unlock()
	if cfg.StartupDelay <= 0 {
		e.becomeReady()
	} else {
		e.timer = time.AfterFunc(cfg.StartupDelay, e.becomeReady)
	}
	return e
}

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

// Stop reports every health service NOT_SERVING, then stops gRPC gracefully,
// cutting off RPCs still running after a short bound. It is idempotent and
// makes Serve return nil. vLLM likewise reports NOT_SERVING before draining.
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
	})
}

// shutdown is the health half of Stop; POST /stop answers after it.
func (e *Engine) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	if e.timer != nil {
		e.timer.Stop()
	}
	for svc := range e.status {
		e.setLocked(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
}

func (e *Engine) becomeReady() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.isReady {
		return
	}
	e.isReady = true
	e.applyLocked()
	close(e.ready)
}

// derivedLocked is the status the engine itself gives svc.
func (e *Engine) derivedLocked(svc string) healthpb.HealthCheckResponse_ServingStatus {
	switch {
	case e.stopped, !e.isReady:
		return healthpb.HealthCheckResponse_NOT_SERVING
	case svc == serviceInference && (e.sleeping || e.paused):
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

// applyLocked brings the engine's services to their derived status, except
// those a test set by hand.
func (e *Engine) applyLocked() {
	for _, svc := range engineServices {
		if !e.manual[svc] {
			e.setLocked(svc, e.derivedLocked(svc))
		}
	}
}

// setLocked changes one status and stamps lastChange just before watchers
// hear of it, so benchmarks can measure detection latency from it.
func (e *Engine) setLocked(svc string, st healthpb.HealthCheckResponse_ServingStatus) {
	if cur, ok := e.status[svc]; ok && cur == st {
		return
	}
	e.status[svc] = st
	e.lastChange = time.Now().UnixNano()
	e.health.SetServingStatus(svc, st)
}

// setManual is POST /health: it pins svc to st until the engine stops.
func (e *Engine) setManual(svc string, st healthpb.HealthCheckResponse_ServingStatus) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errStopped
	}
	e.manual[svc] = true
	e.setLocked(svc, st)
	return nil
}

var errStopped = errors.New("engine is stopped")

// setSleeping and setPaused put the engine to sleep or pause generation, or
// undo it; PAUSE_MODE_ABORT also aborts in-flight requests, as in vLLM.
// Other modes let in-flight requests run on.
func (e *Engine) setSleeping(on bool, mode vllmpb.PauseMode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sleeping = on
	e.afterPauseLocked(on, mode)
}

func (e *Engine) setPaused(on bool, mode vllmpb.PauseMode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paused = on
	e.afterPauseLocked(on, mode)
}

func (e *Engine) afterPauseLocked(on bool, mode vllmpb.PauseMode) {
	if on && mode == vllmpb.PauseMode_PAUSE_MODE_ABORT {
		for st := range e.streams {
			st.abort()
		}
	}
	e.applyLocked()
}

// unavailableLocked says why the engine cannot take an RPC now, if it cannot.
// Inference also needs the engine awake and unpaused.
func (e *Engine) unavailableLocked(inference bool) error {
	switch {
	case e.stopped:
		return status.Error(codes.Unavailable, "engine is shutting down")
	case !e.isReady:
		return status.Error(codes.Unavailable, "engine is still starting")
	case inference && e.sleeping:
		return status.Error(codes.Unavailable, "engine is sleeping")
	case inference && e.paused:
		return status.Error(codes.Unavailable, "generation is paused")
	}
	return nil
}

// abortRequests counts an abort for each id and aborts its in-flight streams.
func (e *Engine) abortRequests(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		e.aborts[id]++
		e.abortTotal++
		for st := range e.streams {
			if st.id == id {
				st.abort()
			}
		}
	}
}

// State is the engine's observable state, as GET /state reports it.
type State struct {
	Model      string `json:"model"`
	InstanceID string `json:"instance_id"`
	// Health maps each health service name to its status name (SERVING, ...).
	Health   map[string]string `json:"health"`
	Sleeping bool              `json:"sleeping"`
	Paused   bool              `json:"paused"`
	// LastHealthChangeUnixNano is time.Now().UnixNano() taken when a health
	// status last changed.
	LastHealthChangeUnixNano int64 `json:"last_health_change_unix_nano"`
	// Requests counts generation requests received per request id, including
	// rejected ones; Aborts counts ids named in Control/Abort.
	Requests      map[string]int `json:"requests"`
	Aborts        map[string]int `json:"aborts"`
	RequestsTotal int            `json:"requests_total"`
	AbortsTotal   int            `json:"aborts_total"`
	// InFlight is the number of generations running now.
	InFlight int `json:"in_flight"`
}

// State returns a snapshot of the engine's state.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := State{
		Model:                    e.cfg.Model,
		InstanceID:               e.cfg.InstanceID,
		Health:                   make(map[string]string, len(e.status)),
		Sleeping:                 e.sleeping,
		Paused:                   e.paused,
		LastHealthChangeUnixNano: e.lastChange,
		Requests:                 make(map[string]int, len(e.requests)),
		Aborts:                   make(map[string]int, len(e.aborts)),
		RequestsTotal:            e.reqTotal,
		AbortsTotal:              e.abortTotal,
		InFlight:                 len(e.streams),
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
