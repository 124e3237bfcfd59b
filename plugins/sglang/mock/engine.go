// Package mock provides a stand-in SGLang engine for tests: a real gRPC
// server speaking SGLang's sglang.runtime.v1.SglangService (or, in the
// older mode, only grpc.health.v1 as sglang.grpc.scheduler servers do),
// plus the JSON control surface of package
// [github.com/vigilhq/vigil/sdk/enginemock]. POST /pause and /resume stand
// for PauseGeneration and ContinueGeneration, POST /health on "" for an
// engine that turns unhealthy, POST /replace for a new engine process
// (a new instance_id) on the same address, POST /drain for a server that
// stops (its grpc.health.v1 NOT_SERVING, the runtime's own health and the
// streams in flight left alone, as Tonic's graceful shutdown lets open
// calls finish). Generation is deterministic
// ([enginemock.OutputToken]), its logprobs too
// ([enginemock.PositionLogprobs], in meta_info as SGLang sends them).
//
// The runtime API comes in either sglang.runtime.v1 layout (Config.Layout).
// As SGLang's gRPC server without a tokenizer does, the mock refuses stop
// strings with INVALID_ARGUMENT; cached_tokens counts the prefix a prompt
// shares with the one before. Every Generate request is recorded
// (enginemock.Engine.RecordRequest) as protojson of the GenerateRequest, as
// it came on the wire.
//
// This package holds what is SGLang's: its wire, its state stream and how
// it derives, and its message shapes; enginemock holds the rest.
package mock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// API selects what the mock serves.
type API string

const (
	// APIRuntime is sglang.runtime.v1.SglangService, today's API.
	APIRuntime API = "runtime"
	// APIScheduler is an older sglang.grpc.scheduler server: grpc.health.v1
	// only, "" for liveness and SchedulerService for readiness, a Watch that
	// sends one status and ends.
	APIScheduler API = "scheduler"
)

// Layout selects how APIRuntime numbers its messages: sglang.runtime.v1
// comes in two layouts that differ in EngineStateSnapshot and in the
// SamplingParams fields the server reads.
type Layout string

const (
	// LayoutReleased is Dynamo's copy of SGLang's contract: server_status
	// 4, is_pause 5, model_info 6, server_info 7 in EngineStateSnapshot;
	// guided decoding by json_schema 14 and regex 15.
	LayoutReleased Layout = "released"
	// LayoutNew is upstream's newer generated types: is_pause 4,
	// model_info 5, server_info 6, no server_status; seed 16 and
	// guided_decoding 17 in SamplingParams.
	LayoutNew Layout = "new"
)

// SchedulerService is the readiness health service of older servers.
const SchedulerService = "sglang.grpc.scheduler.SglangScheduler"

// Config describes one mock engine. The zero value is usable.
type Config struct {
	// Model is reported as model_path and served_model_name. Default
	// "mock-model".
	Model string
	// InstanceID is the engine's lifetime id, instance_id in the state
	// stream: a decimal uint64, or 16 hex characters (enginemock's default,
	// read as hexadecimal). Default: random.
	InstanceID string
	// StartupDelay is how long the engine is STARTING and unhealthy after
	// New. Default 0.
	StartupDelay time.Duration
	// ContextLength is the server's context_length in tokens; 0 reports
	// null, the model's own limit. Default 0.
	ContextLength uint32
	// TokenDelay is the pause between two messages of one generation.
	TokenDelay time.Duration
	// StepInterval, above 0, turns on step mode: every step, each
	// generation in flight gets its next token; see enginemock.Config.
	StepInterval time.Duration
	// TokensPerMessage is how many output ids each message carries.
	// Default 1.
	TokensPerMessage int
	// ServerOptions are the gRPC server's options (connections recycled
	// by MaxConnectionAge, say); see enginemock.Config.
	ServerOptions []grpc.ServerOption
	// API selects the API served. Default APIRuntime.
	API API
	// Layout selects APIRuntime's layout. Default LayoutReleased.
	Layout Layout
	// OmitFirstPromptLogprob leaves the prompt's first position out of
	// input_token_logprobs, as older SGLang releases do; current ones send
	// it as [null, id, null].
	OmitFirstPromptLogprob bool
	// BareSnapshots leaves model_info and server_info out of the state
	// snapshots, as a server may: what is left of a snapshot in either
	// layout may then fit both.
	BareSnapshots bool
}

// Engine is one mock SGLang engine: enginemock's engine with SGLang's
// services registered on it. Create it with New.
type Engine struct {
	*enginemock.Engine
	cfg    Config
	cache  prefixCache
	state  *stateStream   // APIRuntime
	health *health.Server // grpc.health.v1: APIScheduler's, and APIRuntime's Check
}

// runtimeService is the runtime's grpc.health.v1 service: NOT_SERVING once
// the server is stopping (and drains), as "" is; Watch is UNIMPLEMENTED.
var runtimeService = sglangpb.SglangService_ServiceDesc.ServiceName

// New builds an engine and starts its StartupDelay timer. A Config that
// cannot be served (an unknown API, an instance id that is not a number) is
// reported by Serve.
func New(cfg Config) *Engine {
	if cfg.API == "" {
		cfg.API = APIRuntime
	}
	if cfg.Layout == "" {
		cfg.Layout = LayoutReleased
	}
	e := &Engine{cfg: cfg}
	kit := enginemock.Config{
		Model:            cfg.Model,
		InstanceID:       cfg.InstanceID,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		Signals:          []string{""},
		Register:         e.register,
	}
	switch cfg.API {
	case APIScheduler:
		e.health = health.NewServer()
		kit.Signals = []string{"", SchedulerService}
		kit.Health = schedulerStatus
		kit.Publish = func(c enginemock.Change) {
			for _, svc := range c.Changed {
				e.health.SetServingStatus(svc, c.Health[svc])
			}
		}
	default:
		e.state = newStateStream()
		e.health = health.NewServer()
		// "" stands for the runtime's own health check (healthy, the
		// snapshot's status), which a drain leaves alone; the runtime's
		// grpc.health.v1 says the server is stopping.
		kit.Signals = []string{"", runtimeService}
		kit.Health = runtimeStatus
		kit.Publish = func(c enginemock.Change) {
			e.state.publish(e.snapshot(c), c.Condition.Stopped)
			e.health.SetServingStatus("", c.Health[runtimeService])
			e.health.SetServingStatus(runtimeService, c.Health[runtimeService])
		}
	}
	e.Engine = enginemock.New(kit)
	return e
}

// register serves SGLang's services; they reach e.Engine only once Serve
// runs, after New has set it.
func (e *Engine) register(s *grpc.Server) error {
	if id := e.cfg.InstanceID; id != "" {
		if _, err := ParseInstanceID(id); err != nil {
			return fmt.Errorf("mock: %w", err)
		}
	}
	if l := e.cfg.Layout; l != LayoutReleased && l != LayoutNew {
		return fmt.Errorf("mock: unknown layout %q: want %s or %s", l, LayoutReleased, LayoutNew)
	}
	switch e.cfg.API {
	case APIRuntime:
		sglangpb.RegisterSglangServiceServer(s, &server{e: e})
		hs, err := enginemock.HealthServer(enginemock.WatchUnimplemented, e.health)
		if err != nil {
			return err
		}
		healthpb.RegisterHealthServer(s, hs)
	case APIScheduler:
		hs, err := enginemock.HealthServer(enginemock.WatchOnce, e.health)
		if err != nil {
			return err
		}
		healthpb.RegisterHealthServer(s, enginemock.BusyChecks(func(ctx context.Context) error { return e.CheckDelay(ctx) }, hs))
	default:
		return fmt.Errorf("mock: unknown API %q: want %s or %s", e.cfg.API, APIRuntime, APIScheduler)
	}
	return nil
}

// runtimeStatus is the runtime's rule: nothing serves before the model is
// loaded; the grpc.health.v1 service does not while the server drains.
func runtimeStatus(svc string, c enginemock.Condition) enginemock.Status {
	switch {
	case !c.Ready, svc == runtimeService && c.Draining:
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

// schedulerStatus is an older server's rule: nothing serves before the
// model is loaded; the scheduler's service is not ready while paused.
func schedulerStatus(svc string, c enginemock.Condition) enginemock.Status {
	switch {
	case !c.Ready, c.Draining, svc == SchedulerService && c.Paused:
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

// ParseInstanceID reads a lifetime id as the mock reports it: a decimal
// uint64, or 16 hex characters.
func ParseInstanceID(s string) (uint64, error) {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	if len(s) == 16 {
		if n, err := strconv.ParseUint(s, 16, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("instance id %q: want a decimal uint64 or 16 hex characters", s)
}
