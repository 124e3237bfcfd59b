// Package endpoint serves the worker's gRPC endpoint on vigil's --listen
// address: the vigil.worker.v1.Worker API, forwarded through the engine
// adapter, and the standard grpc.health.v1 service reporting the worker's
// own state (so grpc_health_probe and Consul gRPC checks work against it).
//
// Admission is decided here: the endpoint refuses requests (UNAVAILABLE)
// while the worker is starting, not ready or draining, and above
// --max-inflight (RESOURCE_EXHAUSTED). Drain waits for the requests in
// flight, up to the grace period, then ends the rest with a final error.
// A request larger than MaxRequestBytes is refused by gRPC itself
// (RESOURCE_EXHAUSTED, "received message larger than max") and never
// admitted.
package endpoint

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// KeepaliveMinTime is the shortest interval at which clients (vigil route)
// may ping the worker endpoint to detect a frozen worker; gRPC's default
// (5 minutes) would cut them off with GOAWAY too_many_pings.
const KeepaliveMinTime = 5 * time.Second

// MaxRequestBytes is the largest request message the worker endpoint
// receives, in bytes; a larger one gets RESOURCE_EXHAUSTED from gRPC before
// it reaches the engine. It is gRPC's default message limit (4 MiB), which
// the adapter's server and the engines' keep, less 64 KiB for what the
// worker and the adapter add to a request on its way (engine request ids,
// engine-specific fields): a request the worker takes fits every later hop.
// vigil route checks requests against it before sending them.
const MaxRequestBytes = 4<<20 - 64<<10

// DefaultMaxInflight is the default --max-inflight: well above what one
// engine batches at once, so that it only stops a runaway client.
const DefaultMaxInflight = 1024

// errGraceEnded ends the requests still in flight when the drain's grace
// period is over.
var errGraceEnded = errors.New("worker draining: grace period ended")

// Server is the worker endpoint.
type Server struct {
	workerv1.UnimplementedWorkerServer

	lis         net.Listener
	grpc        *grpc.Server
	health      *health.Server
	log         hclog.Logger
	maxInflight int

	mu        sync.Mutex
	admitting bool
	refusal   string // why requests are refused while !admitting
	engine    sdk.Generator
	worker    sdk.Worker
	seq       uint64
	inflight  map[uint64]context.CancelCauseFunc
	idle      chan struct{} // closed when inflight empties; nil while it is empty
}

// New returns a Server on lis that refuses requests until Attach and
// Admit(true). maxInflight <= 0 means DefaultMaxInflight.
func New(lis net.Listener, maxInflight int, log hclog.Logger) *Server {
	if maxInflight <= 0 {
		maxInflight = DefaultMaxInflight
	}
	s := &Server{
		lis: lis, health: health.NewServer(), log: log,
		grpc: grpc.NewServer(append(sdk.StreamServerOptions(), grpc.MaxRecvMsgSize(MaxRequestBytes),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime}))...),
		maxInflight: maxInflight, refusal: "worker starting", inflight: map[uint64]context.CancelCauseFunc{},
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	workerv1.RegisterWorkerServer(s.grpc, s)
	s.setHealth(false)
	return s
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
	s.engine, s.worker = g, w
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
// ends first, the requests still in flight are ended with a final error
// (UNAVAILABLE, "grace period ended"), and Drain returns once they have.
func (s *Server) Drain(ctx context.Context) {
	s.Admit(false, "worker draining")
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
		return
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, cancel := range s.inflight {
		cancel(errGraceEnded)
	}
	idle = s.idle
	s.mu.Unlock()
	if idle != nil {
		<-idle
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
