// Package mock provides a stand-in vLLM engine for tests: a real gRPC server
// speaking vLLM's vllm.Inference and vllm.Control services and
// grpc.health.v1.Health, plus the JSON control surface of package
// [github.com/vigilhq/vigil/sdk/enginemock] (see [enginemock.Engine.Handler])
// that flips health, sleeps, pauses, holds and fails streams. Generation is
// deterministic (see [OutputToken]), so tests can predict every token; it
// refuses what vLLM refuses but constrains no output. Logprobs, when
// asked, are [enginemock.PositionLogprobs] at each position. GET /state's
// last_request is the last generation request as protojson of vLLM's
// GenerateRequest.
// Behaviour follows vLLM's gRPC server (vllm-project/vllm) after v0.33.0:
// "vllm.Inference" follows readiness, "" only liveness.
//
// This package holds what is vLLM's: its wire, its health services and
// how they derive, PAUSE_MODE_ABORT, and its message shapes; enginemock
// holds the rest.
package mock

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// Health service names vLLM registers: the whole server, and one per service.
var (
	serviceServer    = ""
	serviceControl   = vllmpb.Control_ServiceDesc.ServiceName
	serviceInference = vllmpb.Inference_ServiceDesc.ServiceName
	engineServices   = []string{serviceServer, serviceControl, serviceInference}
)

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
	// StepInterval, above 0, turns on step mode: every step, each
	// generation in flight gets its next token; see enginemock.Config.
	StepInterval time.Duration
	// TokensPerMessage is how many output tokens each message carries; the
	// last message of a sequence may carry fewer. Default 1; values below 1
	// mean 1.
	TokensPerMessage int
	// ServerOptions are the gRPC server's options (connections recycled
	// by MaxConnectionAge, say); see enginemock.Config.
	ServerOptions []grpc.ServerOption
	// WatchMode selects how Health/Watch behaves. Default WatchNormal.
	WatchMode WatchMode
	// CachedTokens is the prefix-cache hit each finish reports in
	// FinishInfo.num_cached_tokens (vllm-proto 0.6), at most the prompt's
	// length. Default 0: the field absent, as from an older vLLM.
	CachedTokens uint32
	// MaxLogprobs is vLLM's --max-logprobs: the most alternatives per
	// position a request may ask (CandidateTokens.top_n; all counts as the
	// vocabulary, 32100 tokens); more is refused with INVALID_ARGUMENT in
	// vLLM's words. Default 20, vLLM's.
	MaxLogprobs uint32
	// ReasoningParser and ToolCallParser are ModelInfo.reasoning_parser
	// and tool_call_parser, the names vLLM was started with
	// (--reasoning-parser, --tool-call-parser). Default "": none, as vLLM
	// reports without them. The mock parses nothing.
	ReasoningParser string
	ToolCallParser  string
}

func (c Config) withDefaults() Config {
	if c.EngineVersion == "" {
		c.EngineVersion = "0.33.0-mock"
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = 4096
	}
	if c.MaxLogprobs == 0 {
		c.MaxLogprobs = 20
	}
	if c.KVBlockSize == 0 {
		c.KVBlockSize = 16
	}
	return c
}

// WatchMode selects how grpc.health.v1.Health/Watch behaves; vLLM's own is
// WatchNormal, the others are those of servers in its family.
type WatchMode = enginemock.WatchMode

// The watch modes; see enginemock.
const (
	WatchNormal        = enginemock.WatchNormal
	WatchOnce          = enginemock.WatchOnce
	WatchUnimplemented = enginemock.WatchUnimplemented
	WatchSilent        = enginemock.WatchSilent
)

// ParseWatchMode parses a WatchMode name; "" means WatchNormal.
func ParseWatchMode(s string) (WatchMode, error) { return enginemock.ParseWatchMode(s) }

// State is the engine's observable state, as GET /state reports it.
type State = enginemock.State

// Engine is one mock vLLM engine: enginemock's engine (Serve, Handler,
// Stop, Ready, State, ...) with vLLM's services registered on it. Create it
// with New.
type Engine struct {
	*enginemock.Engine
	cfg    Config
	health *health.Server
}

// New builds an engine and starts its StartupDelay timer. All health
// services start NOT_SERVING and turn SERVING once the delay has passed; an
// unknown WatchMode is reported by Serve.
func New(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{cfg: cfg, health: health.NewServer()}
	e.Engine = enginemock.New(enginemock.Config{
		Model:            cfg.Model,
		InstanceID:       cfg.InstanceID,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		Signals:          engineServices,
		Health:           servingStatus,
		Publish:          e.publish,
		Register:         e.register,
	})
	return e
}

// register serves vLLM's services; they reach e.Engine only once Serve
// runs, after New has set it.
func (e *Engine) register(s *grpc.Server) error {
	hs, err := enginemock.HealthServer(e.cfg.WatchMode, e.health)
	if err != nil {
		return err
	}
	healthpb.RegisterHealthServer(s, enginemock.BusyChecks(func(ctx context.Context) error { return e.CheckDelay(ctx) }, hs))
	vllmpb.RegisterInferenceServer(s, &inferenceServer{e: e})
	vllmpb.RegisterControlServer(s, &controlServer{e: e})
	return nil
}

// publish hands health changes to grpc-go's health server, which starts ""
// SERVING; New's first publish makes it NOT_SERVING, as vLLM starts.
func (e *Engine) publish(c enginemock.Change) {
	for _, svc := range c.Changed {
		e.health.SetServingStatus(svc, c.Health[svc])
	}
}

// servingStatus is vLLM's rule: nothing serves before the model is loaded
// nor while it drains (its shutdown grace period: the streams in flight run
// on); then "vllm.Inference" follows readiness and "" and "vllm.Control"
// stay up.
func servingStatus(svc string, c enginemock.Condition) enginemock.Status {
	switch {
	case !c.Ready, c.Draining:
		return healthpb.HealthCheckResponse_NOT_SERVING
	case svc == serviceInference && (c.Sleeping || c.Paused):
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}
