// Package metrics provides vigil's Prometheus metrics: those of `vigil run`
// (Worker) and of `vigil route` (Router), each in a private registry with
// the Go and process collectors, served on their own listener (Serve) at
// /metrics, and /debug/pprof when asked, never behind the router's API key.
//
// Names follow Prometheus' conventions: the vigil_ prefix, counters ending
// in _total, durations in seconds (_seconds). Labels whose values are fixed
// (outcomes, causes, states) have their children resolved once, up front,
// so that counting on a request's path allocates nothing, and each shows
// from the first scrape at 0. The table of docs/metrics.md lists every
// metric (TestDocsListTheMetrics).
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry is a private registry holding the Go and process collectors
// and vigil_build_info.
func newRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vigil_build_info",
		Help: "Always 1; labels give vigil's version and the Go version it was built with.",
	}, []string{"version", "goversion"})
	info.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(info)
	return reg
}

// Handler serves reg at /metrics and, when withPprof, net/http/pprof at
// /debug/pprof/.
func Handler(reg prometheus.Gatherer, withPprof bool, log hclog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Server serves metrics on its own listener.
type Server struct {
	http *http.Server
	lis  net.Listener
}

// Serve serves Handler(reg, withPprof) on lis until Close; a failure to
// serve is logged.
func Serve(lis net.Listener, reg prometheus.Gatherer, withPprof bool, log hclog.Logger) *Server {
	s := &Server{lis: lis, http: &http.Server{
		Handler:           Handler(reg, withPprof, log),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}}
	go func() {
		if err := s.http.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "error", err)
		}
	}()
	return s
}

// Addr is the address the metrics are served on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Close stops serving, giving a scrape in flight up to a second.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		s.http.Close()
	}
}
