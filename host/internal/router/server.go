package router

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"google.golang.org/grpc"
)

// DefaultDrainTimeout is how long requests in flight may finish after a
// stop signal (vigil route --grace-period): long enough for most
// completions to end, short enough for a restart to stay quick; longer
// generations are cut off.
const DefaultDrainTimeout = 10 * time.Second

// DefaultIdleTimeout is how long the HTTP server keeps an idle keep-alive
// connection (vigil route --idle-timeout). It must outlast the idle timeout
// of the load balancer in front, so that the balancer, never the router,
// closes an idle connection: a router that closes first races the
// balancer's next request on it, which then fails with 502. 11 minutes is
// above Google Cloud's load balancers (which keep backend connections 600 s
// and ask backends for more) and AWS ALB's default 60 s; an ALB set higher
// (up to 4000 s) needs --idle-timeout above it.
const DefaultIdleTimeout = 11 * time.Minute

// shutdownSlack is what the shutdown budget allows beyond the drain
// timeout, for the handlers cancelled at its end to return. Past it a
// handler has ignored its cancellation, and waiting longer would not help.
const shutdownSlack = 5 * time.Second

// ServerConfig is what a Server needs.
type ServerConfig struct {
	// GRPCListener and HTTPListener listen for the worker API and the
	// OpenAI-compatible API; Run closes them. HTTPListener may be a
	// tls.NewListener's.
	GRPCListener, HTTPListener net.Listener
	// GRPCOptions are added to the gRPC server's, such as grpc.Creds for
	// TLS.
	GRPCOptions []grpc.ServerOption
	// Source finds the workers; Service names them in the log.
	Source  discovery.Discoverer
	Service string
	// Pool, Proxy and HTTP configure the pool, the proxy and the HTTP
	// handler; their loggers are the Server's, named.
	Pool  PoolConfig
	Proxy ProxyConfig
	HTTP  HTTPConfig
	// DrainTimeout bounds the drain after a stop signal (and the shutdown
	// delay); 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// ShutdownDelay keeps both listeners open and serving this long after
	// a stop signal, while health says NOT_SERVING (gRPC) and 503
	// (/health), for load balancers that learn of it late; 0: none.
	ShutdownDelay time.Duration
	// IdleTimeout is the HTTP server's for idle keep-alive connections; 0
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// HTTPErrorLog is the HTTP server's ErrorLog, such as a
	// tlsconfig.Server's (which logs refused handshakes); nil: Logger's.
	HTTPErrorLog *log.Logger
	// Ready, if set, is called once both servers accept.
	Ready  func()
	Logger hclog.Logger
}

// Server is `vigil route`'s lifecycle: it serves the workers that Source
// finds until a stop signal, then drains.
type Server struct {
	cfg ServerConfig
	log hclog.Logger
}

// NewServer returns a Server for cfg.
func NewServer(cfg ServerConfig) *Server {
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	return &Server{cfg: cfg, log: orNull(cfg.Logger)}
}

// servers are a running Server's parts, for the drain and the unwind.
type servers struct {
	grpc       *GRPCServer
	http       *http.Server
	proxy      *Proxy
	cancelBase context.CancelFunc // ends the HTTP handlers
	failed     chan error         // a server that stopped serving
	unwind     func()
}

// Run serves until a stop signal or a server's failure. After a signal,
// health says NOT_SERVING at once and both listeners serve on for
// ShutdownDelay; then it stops accepting and gives requests in flight
// DrainTimeout. It returns nil after a signal; the failure when a server
// failed; outcome.ErrDrainCut when a second signal cut the delay or the
// drain short; outcome.ErrShutdownBudget when the drain outlived
// DrainTimeout and slack. signals delivers the stop signals (SIGTERM,
// SIGINT, SIGHUP).
func (s *Server) Run(ctx context.Context, signals <-chan os.Signal) error {
	sv := s.start(ctx)
	defer sv.unwind()
	var failure error
	cut := false
	select {
	case sig := <-signals:
		// /health first: it is 503 once gRPC health's watchers hear, and
		// both before the log says so.
		sv.proxy.stopping.Store(true)
		sv.grpc.NotServing()
		s.log.Info("stopping: health not serving; requests in flight may finish", "signal", sig.String(),
			"shutdown_delay", s.cfg.ShutdownDelay, "grace_period", s.cfg.DrainTimeout)
		cut = s.delay(signals)
	case failure = <-sv.failed:
		s.log.Error("router failed; stopping", "error", failure)
	}
	if cut {
		signals = nil
	}
	return errors.Join(failure, s.drain(ctx, sv, signals, cut))
}

// delay serves on for ShutdownDelay after a stop signal, so that load
// balancers that poll health see the router leave before it refuses
// connections; it reports whether a second signal cut it short.
func (s *Server) delay(signals <-chan os.Signal) (cut bool) {
	if s.cfg.ShutdownDelay <= 0 {
		return false
	}
	t := time.NewTimer(s.cfg.ShutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
		s.log.Info("shutdown delay over: no new connections", "shutdown_delay", s.cfg.ShutdownDelay)
		return false
	case sig := <-signals:
		s.log.Warn("second signal during the shutdown delay: cancelling requests in flight", "signal", sig.String())
		return true
	}
}

// start builds the pool, the proxy and both servers, starts following
// discovery and serving, in that order; unwind undoes it.
func (s *Server) start(ctx context.Context) *servers {
	pocfg, pcfg, hcfg := s.cfg.Pool, s.cfg.Proxy, s.cfg.HTTP
	pocfg.Logger, pcfg.Logger, hcfg.Logger = s.log.Named("pool"), s.log.Named("proxy"), s.log.Named("http")
	pool := NewPool(pocfg)
	proxy := NewProxy(pool, pcfg)
	// Handlers run under base, which ends when the drain runs out.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	sv := &servers{
		grpc: NewGRPCServer(proxy, s.cfg.GRPCOptions...),
		http: &http.Server{
			Handler:           NewHTTPHandler(proxy, hcfg),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       s.cfg.IdleTimeout,
			BaseContext:       func(net.Listener) context.Context { return base },
			ErrorLog:          s.httpErrorLog(),
		},
		proxy:      proxy,
		cancelBase: cancelBase,
		failed:     make(chan error, 2),
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.cfg.Source.Run(watchCtx, pool.Update)
	}()
	sv.unwind = func() {
		stopWatch()
		<-watched
		cancelBase()
		pool.Close()
	}

	go func() {
		if err := sv.grpc.Serve(s.cfg.GRPCListener); err != nil {
			sv.failed <- fmt.Errorf("grpc server: %w", err)
		}
	}()
	go func() {
		if err := sv.http.Serve(s.cfg.HTTPListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			sv.failed <- fmt.Errorf("http server: %w", err)
		}
	}()
	s.log.Info("router listening", "grpc", s.cfg.GRPCListener.Addr().String(), "http", s.cfg.HTTPListener.Addr().String(),
		"discovery", s.cfg.Source.String(), "service", s.cfg.Service, "retries", s.cfg.Proxy.Retries)
	if s.cfg.Ready != nil {
		s.cfg.Ready()
	}
	return sv
}

// drain stops both servers, giving requests in flight DrainTimeout; a
// second signal cuts it short (cut: one already did), and the budget
// abandons it.
func (s *Server) drain(ctx context.Context, sv *servers, signals <-chan os.Signal, cut bool) error {
	bound, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DrainTimeout)
	defer cancel()
	var cutErr error
	if cut {
		cancel()
		cutErr = outcome.ErrDrainCut
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sv.grpc.Shutdown(bound)
		}()
		if err := sv.http.Shutdown(bound); err != nil {
			// The bound passed: end the requests still running.
			sv.cancelBase()
			sv.http.Close()
		}
		<-done
	}()
	budget := time.NewTimer(s.cfg.DrainTimeout + shutdownSlack)
	defer budget.Stop()
	return s.awaitDrain(drained, bound, cancel, budget.C, signals, cutErr)
}

// awaitDrain waits for the drain, cancelling it at a second signal, until
// the budget runs out.
func (s *Server) awaitDrain(drained <-chan struct{}, bound context.Context, cancel context.CancelFunc,
	budget <-chan time.Time, signals <-chan os.Signal, cut error) error {
	for {
		select {
		case <-drained:
			if bound.Err() != nil && cut == nil {
				s.log.Warn("drain bound passed; requests still in flight were cancelled", "bound", s.cfg.DrainTimeout)
			}
			return cut
		case sig := <-signals:
			s.log.Warn("second signal: cancelling requests in flight", "signal", sig.String())
			cancel()
			cut, signals = outcome.ErrDrainCut, nil
		case <-budget:
			s.log.Error("the drain outlived its shutdown budget; exiting without finishing it", "budget", s.cfg.DrainTimeout+shutdownSlack)
			return errors.Join(cut, outcome.ErrShutdownBudget)
		}
	}
}
