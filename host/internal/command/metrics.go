package command

import (
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/host/internal/metrics"
	"github.com/vigilhq/vigil/host/internal/router"
	"github.com/vigilhq/vigil/host/internal/supervisor"
)

// metricsFlags are run's and route's: Prometheus metrics on a listener of
// their own, so that no API key ever guards them.
func metricsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-listen", EnvVars: env("METRICS_LISTEN"),
			Usage: "address to serve Prometheus metrics on, at /metrics, host:port; a listener of its own, never behind an API key (default: no metrics)"},
		&cli.BoolFlag{Name: "pprof", EnvVars: env("PPROF"),
			Usage: "also serve Go's profiler (net/http/pprof) at /debug/pprof/ on --metrics-listen"},
	}
}

// metricsConfig is the validated form of the metrics flags.
type metricsConfig struct {
	listen string // "": no metrics
	pprof  bool
}

func parseMetrics(c *cli.Context) (metricsConfig, error) {
	cfg := metricsConfig{listen: c.String("metrics-listen"), pprof: c.Bool("pprof")}
	if cfg.listen == "" {
		if cfg.pprof {
			return cfg, usageErrorf("--pprof: needs --metrics-listen, whose listener serves it")
		}
		return cfg, nil
	}
	_, _, err := splitHostPort("metrics-listen", cfg.listen)
	return cfg, err
}

// listen opens the metrics listener; nil when there are no metrics.
func (m metricsConfig) open() (net.Listener, error) {
	if m.listen == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", m.listen)
	if err != nil {
		return nil, exit(fmt.Errorf("--metrics-listen %s: %w", m.listen, err))
	}
	return lis, nil
}

// serveRunMetrics, with --metrics-listen, serves vigil run's metrics and
// has the lifecycle lc, its announcer and the endpoint ep feed them. The
// returned func stops serving.
func serveRunMetrics(m metricsConfig, lc *supervisor.Config, ep *endpoint.Server, log hclog.Logger) (func(), error) {
	lis, err := m.open()
	if lis == nil {
		return func() {}, err
	}
	w := metrics.NewWorker(Version, metrics.WorkerSources{InFlight: ep.InFlight, Registered: lc.Announcer.Registered,
		Refused: func() bool { return lc.Announcer.State() == discovery.Refused }})
	lc.Observer = w
	lc.Announcer.Observe(w.Announcer())
	ep.Observe(w)
	srv := metrics.Serve(lis, w.Registry(), m.pprof, log.Named("metrics"))
	log.Info("serving metrics", "metrics_listen", lis.Addr().String(), "pprof", m.pprof)
	return srv.Close, nil
}

// serveRouteMetrics, with --metrics-listen, serves vigil route's metrics
// and has the proxy of cfg feed them. The returned func stops serving.
func serveRouteMetrics(m metricsConfig, cfg *router.ProxyConfig, log hclog.Logger) (func(), error) {
	lis, err := m.open()
	if lis == nil {
		return func() {}, err
	}
	r := metrics.NewRouter(Version)
	cfg.Observer = r
	srv := metrics.Serve(lis, r.Registry(), m.pprof, log.Named("metrics"))
	log.Info("serving metrics", "metrics_listen", lis.Addr().String(), "pprof", m.pprof)
	return srv.Close, nil
}
