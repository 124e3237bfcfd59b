// Package engine is the toy engine: a small gRPC server (toy.v1.EngineService
// and grpc.health.v1) that "generates" by echoing its prompt back, one token
// per message. It is the engine the example adapter watches; an adapter's
// own module would not have it, since the engine is someone else's program.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/examples/adapter/toypb"
)

// Version is the toy engine's version, as Info reports it.
const Version = "0.1.0"

// Config configures a Server.
type Config struct {
	// Model is the model name Info reports. Default "toy-model".
	Model string
	// TokenDelay is the time between two tokens of a generation, so that
	// a request takes long enough to be cancelled. Default 0.
	TokenDelay time.Duration
}

// Server is one run of the toy engine. Create it with New.
type Server struct {
	cfg      Config
	instance string
	grpc     *grpc.Server
	health   *health.Server

	mu       sync.Mutex
	paused   bool
	requests map[string]context.CancelCauseFunc // in flight, by request id
}

// readiness is the grpc.health.v1 service that is NOT_SERVING while the
// engine is paused, named after the engine's service as the health protocol
// suggests; "" is its liveness.
var readiness = toypb.EngineService_ServiceDesc.ServiceName

// errAborted ends a generation that Abort named.
var errAborted = status.Error(codes.Aborted, "aborted")

// New returns a toy engine with a new instance id, serving and not paused.
func New(cfg Config) *Server {
	if cfg.Model == "" {
		cfg.Model = "toy-model"
	}
	s := &Server{
		cfg:      cfg,
		instance: newInstanceID(),
		grpc:     grpc.NewServer(),
		health:   health.NewServer(),
		requests: make(map[string]context.CancelCauseFunc),
	}
	s.health.SetServingStatus(readiness, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	toypb.RegisterEngineServiceServer(s.grpc, &service{s: s})
	return s
}

func newInstanceID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails on the platforms Go supports
	return hex.EncodeToString(b)
}

// Serve serves on lis until Stop, and returns nil then, even when Stop came
// first.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop reports every health service NOT_SERVING, then closes every
// connection and ends every request: the engine is gone.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.grpc.Stop()
}

// Pause turns readiness off (paused) or back on. While paused the engine
// stays alive and refuses new requests with UNAVAILABLE.
func (s *Server) Pause(paused bool) {
	s.mu.Lock()
	s.paused = paused
	s.mu.Unlock()
	st := healthpb.HealthCheckResponse_SERVING
	if paused {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.health.SetServingStatus(readiness, st)
}

// service implements toy.v1.EngineService.
type service struct {
	toypb.UnimplementedEngineServiceServer
	s *Server
}

func (v *service) Info(context.Context, *toypb.InfoRequest) (*toypb.InfoResponse, error) {
	return &toypb.InfoResponse{Model: v.s.cfg.Model, Version: Version, InstanceId: v.s.instance}, nil
}

func (v *service) Generate(req *toypb.GenerateRequest, stream grpc.ServerStreamingServer[toypb.GenerateResponse]) error {
	tokens, err := prompt(req)
	if err != nil {
		return err
	}
	ctx, done, err := v.s.begin(stream.Context(), req.GetRequestId())
	if err != nil {
		return err
	}
	defer done()
	final := &toypb.GenerateResponse{FinishReason: toypb.FinishReason_FINISH_REASON_STOP, PromptTokens: uint32(len(tokens))}
	for i, tok := range tokens {
		if limit := req.GetMaxTokens(); limit > 0 && uint32(i) == limit {
			final.FinishReason = toypb.FinishReason_FINISH_REASON_LENGTH
			break
		}
		if !sleep(ctx, v.s.cfg.TokenDelay) {
			break
		}
		if err := stream.Send(tok); err != nil {
			return err
		}
		final.CompletionTokens++
	}
	if cause := context.Cause(ctx); errors.Is(cause, errAborted) {
		final.FinishReason = toypb.FinishReason_FINISH_REASON_ABORTED
	} else if cause != nil {
		return status.FromContextError(ctx.Err()).Err() // the client went away
	}
	return stream.Send(final)
}

func (v *service) Abort(_ context.Context, req *toypb.AbortRequest) (*toypb.AbortResponse, error) {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	for _, id := range req.GetRequestIds() {
		if cancel, ok := v.s.requests[id]; ok {
			cancel(errAborted)
		}
	}
	return &toypb.AbortResponse{}, nil
}

// prompt turns a request's prompt into the messages that echo it.
func prompt(req *toypb.GenerateRequest) ([]*toypb.GenerateResponse, error) {
	text, ids := req.GetText(), req.GetTokenIds()
	if (text == "") == (len(ids) == 0) {
		return nil, status.Error(codes.InvalidArgument, "exactly one of text and token_ids must be set")
	}
	var out []*toypb.GenerateResponse
	for _, id := range ids {
		out = append(out, &toypb.GenerateResponse{TokenIds: []uint32{id}})
	}
	for i, w := range strings.Fields(text) {
		h := fnv.New32a()
		h.Write([]byte(w))
		if i > 0 {
			w = " " + w
		}
		out = append(out, &toypb.GenerateResponse{Text: w, TokenIds: []uint32{h.Sum32()}})
	}
	return out, nil
}

// begin records a request in flight, refusing it while paused or when its
// id is taken; done forgets it.
func (s *Server) begin(ctx context.Context, id string) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return nil, nil, status.Error(codes.Unavailable, "paused")
	}
	if _, ok := s.requests[id]; ok {
		return nil, nil, status.Errorf(codes.AlreadyExists, "request %q is in flight", id)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s.requests[id] = cancel
	return ctx, func() {
		s.mu.Lock()
		delete(s.requests, id)
		s.mu.Unlock()
		cancel(nil)
	}, nil
}

// sleep waits d, or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
