// Package endpoint serves the worker's gRPC endpoint on vigil's --listen
// address: the vigil.worker.v1.Worker API, forwarded through the engine
// adapter, and the standard grpc.health.v1 service reporting the worker's
// own state (so grpc_health_probe, Kubernetes gRPC probes and Consul gRPC
// checks work against it) under three service names:
//
//   - "" (and vigil.worker.v1.Worker): readiness. SERVING only while the
//     worker admits requests; NOT_SERVING while it starts, waits for its
//     engine, is not ready or drains.
//   - [workerapi.LivenessService]: liveness. SERVING from New for as long as the
//     lifecycle runs, a long wait for the engine included; NOT_SERVING once
//     vigil is stopping for good (Stopping: a drain began) and after Close.
//   - [workerapi.RegistrationService]: the registration. SERVING while the
//     registry holds the worker (Registered(true), which vigil run's
//     announcer drives), NOT_SERVING otherwise.
//
// Admission is decided here: the endpoint refuses requests (UNAVAILABLE)
// while the worker is starting, not ready or draining, and above
// --max-inflight (RESOURCE_EXHAUSTED). Drain waits for the requests in
// flight, up to the grace period, then ends the rest with a final error
// and has the engine abort them (Generator.Abort) before it returns, so
// that the engine stops generating before the adapter is shut down.
// Finish drains for an engine that drains on purpose: requests in flight
// run on while they make progress, and one with no chunk for the stall
// timeout is cut alone.
// An engine wrapped with Wrap (vigil run's tokenization, package textgen)
// may take more than its adapter reports: text prompts whatever the
// adapter takes ([Prompts].TakesText) and chat prompts
// ([Prompts].TakesChat, prompt.messages, forwarded with GenerateChat).
// Otherwise text goes to the engine as it is, where it takes text, and
// prompt.messages is refused (INVALID_ARGUMENT naming prompt.messages and
// the flags that load a chat template). An engine's refusal carrying an
// INVALID_ARGUMENT gRPC status reaches the client as it is.
// A request over the model's length carries a
// google.rpc.ErrorInfo ([workerapi.ReasonContextLength]) with the numbers.
// Embed serves a worker whose engine's model is an embedding model (its
// adapter lists embed and serves sdk.Embedder), admitted as Generate is;
// other workers answer it UNIMPLEMENTED, and such a worker answers Generate
// INVALID_ARGUMENT naming its model.
// A request larger than [workerapi.MaxRequestBytes] is refused by gRPC itself
// (RESOURCE_EXHAUSTED, "received message larger than max") and never
// admitted.
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// DefaultMaxInflight is the default --max-inflight: well above what one
// engine batches at once, so that it only stops a runaway client.
const DefaultMaxInflight = 1024

// cutError is the cause of a request the worker cut: its client is told
// UNAVAILABLE with the message.
type cutError struct{ msg string }

func (e *cutError) Error() string { return e.msg }

// errGraceEnded ends the requests still in flight when the drain's grace
// period is over.
var errGraceEnded error = &cutError{"worker draining: grace period ended"}

// errStalled ends a request that made no progress for the stall timeout
// while its engine drains on purpose.
var errStalled error = &cutError{"worker draining: no output within the stall timeout (--stall-timeout)"}

// errDrainEnded ends the requests still in flight when the drain of an
// engine that drains on purpose ends: --drain-timeout, or the grace period
// after a loss or a stop during it.
var errDrainEnded error = &cutError{"worker draining: the engine's drain ended (--drain-timeout, or the grace period after a loss or a stop)"}

// Server is the worker endpoint.
type Server struct {
	workerv1.UnimplementedWorkerServer

	lis         net.Listener
	grpc        *grpc.Server
	health      *health.Server
	log         hclog.Logger
	maxInflight int
	obs         atomic.Pointer[observer] // nil: none

	mu        sync.Mutex
	admitting bool
	refusal   string        // why requests are refused while !admitting
	engine    sdk.Generator // wrapped, when wrap is set
	raw       sdk.Generator // as attached
	wrap      func(sdk.Generator) sdk.Generator
	worker    sdk.Worker
	workerID  string  // "": requests naming any worker id are served
	accepts   accepts // what the worker takes with the engine attached
	seq       uint64
	slots     int // engine requests in flight: each request's n
	inflight  map[uint64]*request
	idle      chan struct{} // closed when inflight empties; nil while it is empty
}

// request is one request in flight.
type request struct {
	cancel context.CancelCauseFunc
	// progress is when it was admitted or last sent a chunk, Unix
	// nanoseconds; cut is set once Finish cut it for a stall.
	progress atomic.Int64
	cut      bool
	// engineIDs are its engine-side request ids once it is forwarded to
	// the engine (one per choice), for Abort; none before.
	engineIDs []string
	slots     int // engine requests it counts against --max-inflight: its n
}

// New returns a Server on lis that refuses requests until Attach and
// Admit(true). maxInflight <= 0 means DefaultMaxInflight. opts are added
// to the gRPC server's, such as grpc.Creds for TLS.
func New(lis net.Listener, maxInflight int, log hclog.Logger, opts ...grpc.ServerOption) *Server {
	if maxInflight <= 0 {
		maxInflight = DefaultMaxInflight
	}
	s := &Server{
		lis: lis, health: health.NewServer(), log: log,
		grpc: grpc.NewServer(append(append(workerapi.ServerOptions(),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: workerapi.KeepaliveMinTime})), opts...)...),
		maxInflight: maxInflight, refusal: "worker starting", inflight: map[uint64]*request{},
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	workerv1.RegisterWorkerServer(s.grpc, s)
	// grpcurl and other tools list and call the services without the protos.
	reflection.Register(s.grpc)
	s.setHealth(false)
	s.health.SetServingStatus(workerapi.LivenessService, healthpb.HealthCheckResponse_SERVING)
	s.Registered(false)
	return s
}

// Registered reports whether the registry holds the worker, for the
// registration service (workerapi.RegistrationService). It does not block.
func (s *Server) Registered(held bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if held {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(workerapi.RegistrationService, st)
}

// observer holds an Observer for atomic.Pointer.
type observer struct{ Observer }

// Observe has o told of every request's end, from now on; nil removes the
// observer.
func (s *Server) Observe(o Observer) {
	if o == nil {
		s.obs.Store(nil)
		return
	}
	s.obs.Store(&observer{o})
}

// Stopping reports vigil stopping for good: the liveness service
// (workerapi.LivenessService) turns NOT_SERVING, and stays so. The lifecycle calls it
// when its drain begins.
func (s *Server) Stopping() {
	s.health.SetServingStatus(workerapi.LivenessService, healthpb.HealthCheckResponse_NOT_SERVING)
}

// Serve serves until Close.
func (s *Server) Serve() error {
	if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Attach sets the engine that requests are forwarded to, and what it
// reported about itself (used to validate requests).
func (s *Server) Attach(g sdk.Generator, w sdk.Worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw, s.engine, s.worker = g, g, w
	if s.wrap != nil && g != nil {
		s.engine = s.wrap(g)
	}
	s.accepts = newAccepts(w, s.engine, s.raw, s.maxInflight)
}

// Wrap has requests forwarded to wrap(engine), for the engine attached
// now and every one attached later; nil forwards to the engine itself.
// What the wrapped engine takes (see [Prompts]) decides which prompts the
// worker takes. Set it before Admit; the registration should say the
// same.
func (s *Server) Wrap(wrap func(sdk.Generator) sdk.Generator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrap, s.engine = wrap, s.raw
	if wrap != nil && s.raw != nil {
		s.engine = wrap(s.raw)
	}
	s.accepts = newAccepts(s.worker, s.engine, s.raw, s.maxInflight)
}

// SetWorkerID sets the worker's id (--worker-id). A request whose metadata
// names another (workerapi.MetaWorkerID, which vigil route sends) gets
// UNAVAILABLE with a workerapi.ReasonWorkerMismatch ErrorInfo: it was meant
// for a worker that held this address before. One that names none is
// served, as from a router of the release before.
func (s *Server) SetWorkerID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workerID = id
}

// Admit starts admitting requests, or stops with reason given to refused
// clients (as UNAVAILABLE). The health service follows.
func (s *Server) Admit(admit bool, reason string) {
	s.mu.Lock()
	s.admitting, s.refusal = admit && s.engine != nil, reason
	admitting := s.admitting
	s.mu.Unlock()
	s.setHealth(admitting)
}

func (s *Server) setHealth(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(workerv1.Worker_ServiceDesc.ServiceName, st)
}

// Drain stops admitting and returns when no request is in flight. When ctx
// ends first, it cuts the requests still in flight: each ends with a final
// error (UNAVAILABLE, "grace period ended"), and the engine is asked to
// abort those forwarded to it, by their engine-side ids, in one
// Generator.Abort. Drain then returns once they have ended and the engine
// has answered, or after cutTimeout, whichever is first; its error says
// what did not finish (wrapping context.DeadlineExceeded when time ran
// out) or that the abort failed. Nil: drained, or cut and aborted.
func (s *Server) Drain(ctx context.Context, cutTimeout time.Duration) error {
	s.Admit(false, "worker draining")
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	return s.cut(errGraceEnded, cutTimeout)
}

// cut ends the requests in flight with cause and has the engine abort
// them, within timeout; see Drain.
func (s *Server) cut(cause error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s.mu.Lock()
	var ids []string
	for _, r := range s.inflight {
		r.cancel(cause)
		ids = append(ids, r.engineIDs...)
	}
	n, engine, idle := len(s.inflight), s.engine, s.idle
	s.mu.Unlock()
	s.log.Info("ending the requests in flight and aborting them at the engine",
		"why", cause.Error(), "requests", n, "forwarded", len(ids))

	var abortErr error
	aborted := make(chan struct{})
	go func() {
		defer close(aborted)
		if len(ids) > 0 && engine != nil {
			abortErr = engine.Abort(ctx, ids)
		}
	}()
	var errs []error
	select {
	case <-aborted:
		if abortErr != nil && !errors.Is(abortErr, sdk.ErrUnimplemented) {
			if sdk.ContextErr(ctx) != nil {
				abortErr = fmt.Errorf("%w (%w)", context.DeadlineExceeded, abortErr)
			}
			errs = append(errs, fmt.Errorf("aborting %d engine requests: %w", len(ids), abortErr))
		}
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("aborting %d engine requests: no answer within %s: %w", len(ids), timeout, ctx.Err()))
	}
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%d requests had not ended %s after they were cut: %w", s.InFlight(), timeout, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// Abandon is for an engine adapter that stopped answering: it stops
// admitting, with reason given to refused clients, and ends every request
// in flight at once, each with UNAVAILABLE and reason. The engine is
// detached, so that no later Drain asks the adapter to abort anything: it
// could not relay the abort (the engine sees the requests' streams close
// when the adapter is killed), which is logged.
func (s *Server) Abandon(reason string) {
	s.mu.Lock()
	s.admitting, s.refusal = false, reason
	cause := &cutError{reason}
	forwarded := 0
	for _, r := range s.inflight {
		r.cancel(cause)
		forwarded += len(r.engineIDs)
	}
	n := len(s.inflight)
	s.engine, s.raw = nil, nil
	s.mu.Unlock()
	s.setHealth(false)
	if n > 0 {
		s.log.Warn("ending the requests in flight without aborting them at the engine: the adapter cannot relay the abort; the engine sees their streams close when the adapter is killed",
			"requests", n, "forwarded", forwarded, "reason", reason)
	}
}

// InFlight returns the number of requests in flight.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// Close stops the server at once.
func (s *Server) Close() {
	s.health.Shutdown()
	s.grpc.Stop()
}
