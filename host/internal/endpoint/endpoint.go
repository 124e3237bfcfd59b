// Package endpoint serves the worker's gRPC endpoint on vigil's --listen
// address: the standard grpc.health.v1 service reporting the worker's own
// state, so that grpc_health_probe and Consul gRPC checks work against it.
package endpoint

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// WorkerService is the health service name of the worker API.
const WorkerService = "vigil.worker.v1.Worker"

// Server is the worker endpoint.
type Server struct {
	lis    net.Listener
	grpc   *grpc.Server
	health *health.Server
}

// New returns a Server on lis; it reports NOT_SERVING until SetServing(true).
func New(lis net.Listener) *Server {
	s := &Server{lis: lis, grpc: grpc.NewServer(), health: health.NewServer()}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.SetServing(false)
	return s
}

// Serve serves until Close.
func (s *Server) Serve() error {
	if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// SetServing sets the worker's health: SERVING while it admits requests.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(WorkerService, st)
}

// Drain stops admitting requests and returns when none is in flight.
func (s *Server) Drain(context.Context) { s.SetServing(false) }

// Close stops the server at once.
func (s *Server) Close() {
	s.health.Shutdown()
	s.grpc.Stop()
}
