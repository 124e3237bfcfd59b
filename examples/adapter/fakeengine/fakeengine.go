// Package fakeengine is the toy engine: its gRPC API (toy.v1.EngineService
// and grpc.health.v1), "generating" by echoing its prompt back a token per
// message, with what a test needs to steer it: pausing, failing, holding a
// generation, and seeing aborts. The adapter's tests serve it in their own
// process; cmd/toy-engine serves it as a process, for the demo.
//
// Your adapter's module keeps a package like it, for its own engine's API:
// the conformance kit (sdktest) steers the engine through it.
package fakeengine

import (
	"context"
	"crypto/rand"
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

// Version is the engine's version, as Info reports it.
const Version = "0.1.0"

// Model is the model the engine reports unless Config.Model says another.
const Model = "toy-model"

// Config configures an Engine; the zero value is what tests want.
type Config struct {
	// Model is the model name Info reports. Default Model.
	Model string
	// TokenDelay is the time between two tokens of a generation, so that
	// a request lasts long enough to cancel by hand. Default 0.
	TokenDelay time.Duration
}

// Engine is one run of the toy engine. Create it with Start or Serve.
type Engine struct {
	Addr string // its gRPC address, host:port

	cfg      Config
	instance string // Info's instance_id: a restarted engine has another
	grpc     *grpc.Server
	health   *health.Server
	served   chan error
	stopOnce sync.Once
	stopErr  error

	mu       sync.Mutex
	paused   bool
	hold     chan struct{}            // closed by Release; nil: no hold
	aborted  map[string]chan struct{} // closed once Abort named the id
	inflight map[string]context.CancelCauseFunc
}

// readiness is the health service NOT_SERVING while paused; "" is liveness.
var readiness = toypb.EngineService_ServiceDesc.ServiceName

var errAborted = errors.New("aborted")

// Start serves an engine on a loopback port until Stop.
func Start() (*Engine, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return Serve(lis, Config{}), nil
}

// Serve serves an engine on lis until Stop.
func Serve(lis net.Listener, cfg Config) *Engine {
	if cfg.Model == "" {
		cfg.Model = Model
	}
	e := &Engine{Addr: lis.Addr().String(), cfg: cfg, instance: rand.Text(), grpc: grpc.NewServer(), health: health.NewServer(),
		served: make(chan error, 1), aborted: map[string]chan struct{}{}, inflight: map[string]context.CancelCauseFunc{}}
	e.health.SetServingStatus(readiness, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(e.grpc, e.health)
	toypb.RegisterEngineServiceServer(e.grpc, &service{e: e})
	go func() { e.served <- e.grpc.Serve(lis) }()
	return e
}

// Stop reports every health service NOT_SERVING and closes every
// connection, as the engine does on SIGTERM; it returns Serve's error.
// Stopping twice is allowed.
func (e *Engine) Stop() error {
	e.stopOnce.Do(func() {
		e.health.Shutdown()
		e.grpc.Stop()
		e.Release()
		if err := <-e.served; !errors.Is(err, grpc.ErrServerStopped) {
			e.stopErr = err
		}
	})
	return e.stopErr
}

// Pause makes the engine not ready (readiness NOT_SERVING, requests
// refused with UNAVAILABLE), or ready again.
func (e *Engine) Pause(on bool) {
	e.mu.Lock()
	e.paused = on
	e.mu.Unlock()
	st := healthpb.HealthCheckResponse_SERVING
	if on {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	e.health.SetServingStatus(readiness, st)
}

// Fail reports the engine failed: liveness NOT_SERVING, the process up.
func (e *Engine) Fail() { e.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) }

// Hold makes every generation that starts from now on wait after its first
// token until Release, Abort names it, or its client goes away.
func (e *Engine) Hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold == nil {
		e.hold = make(chan struct{})
	}
}

// Release frees every held generation and ends Hold.
func (e *Engine) Release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold != nil {
		close(e.hold)
		e.hold = nil
	}
}

// Aborted returns a channel closed once Abort has named id.
func (e *Engine) Aborted(id string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.abortedLocked(id)
}

func (e *Engine) abortedLocked(id string) chan struct{} {
	ch, ok := e.aborted[id]
	if !ok {
		ch = make(chan struct{})
		e.aborted[id] = ch
	}
	return ch
}

// service implements toy.v1.EngineService.
type service struct {
	toypb.UnimplementedEngineServiceServer
	e *Engine
}

func (s *service) Info(context.Context, *toypb.InfoRequest) (*toypb.InfoResponse, error) {
	return &toypb.InfoResponse{Model: s.e.cfg.Model, Version: Version, InstanceId: s.e.instance}, nil
}

func (s *service) Abort(_ context.Context, req *toypb.AbortRequest) (*toypb.AbortResponse, error) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	for _, id := range req.GetRequestIds() {
		if ch := s.e.abortedLocked(id); !isClosed(ch) {
			close(ch)
		}
		if cancel, ok := s.e.inflight[id]; ok {
			cancel(errAborted)
		}
	}
	return &toypb.AbortResponse{}, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *service) Generate(req *toypb.GenerateRequest, stream grpc.ServerStreamingServer[toypb.GenerateResponse]) error {
	tokens, err := echo(req)
	if err != nil {
		return err
	}
	ctx, hold, done, err := s.e.begin(stream.Context(), req.GetRequestId())
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
		if i == 1 && hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		if !sleep(ctx, s.e.cfg.TokenDelay) {
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

// begin records a request in flight, refusing it while paused or when its
// id is taken; it returns the hold the request waits at (nil: none) and
// done, which forgets it.
func (e *Engine) begin(ctx context.Context, id string) (context.Context, <-chan struct{}, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused {
		return nil, nil, nil, status.Error(codes.Unavailable, "paused")
	}
	if _, ok := e.inflight[id]; ok {
		return nil, nil, nil, status.Errorf(codes.AlreadyExists, "request %q is in flight", id)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	e.inflight[id] = cancel
	return ctx, e.hold, func() {
		e.mu.Lock()
		delete(e.inflight, id)
		e.mu.Unlock()
		cancel(nil)
	}, nil
}

// echo turns a request's prompt into the messages that echo it: a token id
// each, or a word of a text prompt each, with its hash for its token id.
func echo(req *toypb.GenerateRequest) ([]*toypb.GenerateResponse, error) {
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
