// Package mock provides a stand-in TensorRT-LLM engine for tests: a real
// gRPC server speaking TensorRT-LLM's trtllm.TrtllmService, plus the JSON
// control surface of package [github.com/vigilhq/vigil/sdk/enginemock]. Its
// HealthCheck answers "OK" while the engine's "" signal serves and a
// description otherwise (POST /health {"status": "NOT_SERVING"} stands for
// a crashed rank: unhealthy until stopped, never exiting); POST
// /health-check {"mode": "hang"} makes HealthCheck stop answering.
// Generation is deterministic ([enginemock.OutputToken]), its logprobs too
// ([enginemock.PositionLogprobs]: each position's top-k map, a sampled
// token outside it reported as 0.0, as TensorRT-LLM does); it refuses what
// TensorRT-LLM refuses but constrains no output. GET /state's last_request
// is the last generation request as protojson of TensorRT-LLM's
// GenerateRequest.
//
// This package holds what is TensorRT-LLM's: its wire, its health answer
// and its message shapes; enginemock holds the rest.
package mock

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// HealthMode is how HealthCheck answers.
type HealthMode string

const (
	// HealthNormal answers "OK" while the engine serves, a description
	// otherwise.
	HealthNormal HealthMode = "normal"
	// HealthUnhealthy answers a crashed rank's description, forever; the
	// process stays up, as TensorRT-LLM's does.
	HealthUnhealthy HealthMode = "unhealthy"
	// HealthHang never answers: the caller's deadline ends each call.
	HealthHang HealthMode = "hang"
)

// ParseHealthMode parses a HealthMode name; "" means HealthNormal.
func ParseHealthMode(s string) (HealthMode, error) {
	switch m := HealthMode(s); m {
	case "":
		return HealthNormal, nil
	case HealthNormal, HealthUnhealthy, HealthHang:
		return m, nil
	}
	return "", fmt.Errorf("unknown health mode %q: want normal, unhealthy or hang", s)
}

// MaxSeqLen is the max_seq_len the mock reports by default, in tokens.
const MaxSeqLen = 4096

// VocabSize is the vocab_size the mock reports by default:
// enginemock.OutputToken's range.
const VocabSize = 32100

// Config describes one mock engine. The zero value is usable.
type Config struct {
	// Model is reported as model_id. Default "mock-model".
	Model string
	// StartupDelay is how long after New HealthCheck reports the engine
	// loading. Default 0.
	StartupDelay time.Duration
	// TokenDelay is the pause between two messages of one generation.
	TokenDelay time.Duration
	// StepInterval, above 0, turns on step mode: every step, each
	// generation in flight gets its next token; see enginemock.Config.
	StepInterval time.Duration
	// TokensPerMessage is how many token ids each chunk carries. Default 1.
	TokensPerMessage int
	// ServerOptions are the gRPC server's options (connections recycled
	// by MaxConnectionAge, say); see enginemock.Config.
	ServerOptions []grpc.ServerOption
	// Health is how HealthCheck answers at first. Default HealthNormal.
	Health HealthMode
	// VocabSize is GetModelInfo's vocab_size, which an embedding_bias's
	// length must match. Default VocabSize; a negative value reports 0,
	// as a server without a tokenizer does, and takes any length.
	VocabSize int
	// CachedTokens is the prefix-cache hit every chunk and complete message
	// reports in cached_tokens, at most the prompt's length. Default 0.
	CachedTokens uint32
	// MaxSeqLen is GetModelInfo's max_seq_len, in tokens: prompt plus
	// output. Default MaxSeqLen.
	MaxSeqLen uint32
	// MaxInputLen is GetModelInfo's max_input_len, in tokens: a longer
	// prompt is refused, as TensorRT-LLM's executor refuses it. Default
	// MaxSeqLen.
	MaxInputLen uint32
}

// Engine is one mock TensorRT-LLM engine: enginemock's engine with
// TrtllmService registered on it. Create it with New.
type Engine struct {
	*enginemock.Engine
	health                 atomic.Value // HealthMode
	maxSeqLen, maxInputLen uint32
	vocabSize              uint32
	cachedTokens           uint32
}

// New builds an engine and starts its StartupDelay timer.
func New(cfg Config) *Engine {
	e := &Engine{maxSeqLen: cmp.Or(cfg.MaxSeqLen, MaxSeqLen)}
	e.maxInputLen = cmp.Or(cfg.MaxInputLen, e.maxSeqLen)
	e.vocabSize = uint32(max(cmp.Or(cfg.VocabSize, VocabSize), 0))
	e.cachedTokens = cfg.CachedTokens
	e.health.Store(cmpOr(cfg.Health, HealthNormal))
	e.Engine = enginemock.New(enginemock.Config{
		Model:            cfg.Model,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		Signals:          []string{""},
		Register: func(s *grpc.Server) error {
			trtllmpb.RegisterTrtllmServiceServer(s, &server{e: e})
			return nil
		},
		Control: map[string]func(*http.Request) error{"/health-check": e.postHealthCheck},
	})
	return e
}

func cmpOr(m, def HealthMode) HealthMode {
	if m == "" {
		return def
	}
	return m
}

// SetHealthMode changes how HealthCheck answers.
func (e *Engine) SetHealthMode(m HealthMode) { e.health.Store(m) }

// postHealthCheck is POST /health-check {"mode": "normal" | "unhealthy" | "hang"}.
func (e *Engine) postHealthCheck(r *http.Request) error {
	var body struct {
		Mode *string `json:"mode"`
	}
	if err := enginemock.Decode(r, &body); err != nil {
		return err
	}
	if body.Mode == nil {
		return fmt.Errorf("mode: required, one of normal, unhealthy, hang")
	}
	m, err := ParseHealthMode(*body.Mode)
	if err != nil {
		return fmt.Errorf("mode: %w", err)
	}
	e.SetHealthMode(m)
	return nil
}

// healthStatus is HealthCheck's answer: "OK", a description, or none (the
// call hangs until ctx ends).
func (e *Engine) healthStatus(ctx context.Context) (string, error) {
	switch e.health.Load().(HealthMode) {
	case HealthHang:
		<-ctx.Done()
		return "", ctx.Err()
	case HealthUnhealthy:
		return "unhealthy: rank 1 crashed (mock)", nil
	}
	c := e.Condition()
	switch {
	case c.Stopped:
		return "unhealthy: shutting down", nil
	case !c.Ready:
		return "unhealthy: loading the engine", nil
	case e.Status("") != healthpb.HealthCheckResponse_SERVING:
		return "unhealthy: executor error (mock)", nil
	}
	return "OK", nil
}
