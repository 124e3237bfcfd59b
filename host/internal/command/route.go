package command

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/router"
	"github.com/vigilhq/vigil/host/internal/tlsconfig"
	"github.com/vigilhq/vigil/host/internal/workerapi"
)

func routeCommand() *cli.Command {
	return &cli.Command{
		Name:  "route",
		Usage: "route gRPC and OpenAI-compatible HTTP requests to the workers found in discovery",
		Description: "route watches discovery for the workers of --service-name and serves the worker API\n" +
			"(vigil.worker.v1.Worker) on --listen and OpenAI-compatible completions on --http-listen,\n" +
			"choosing among the workers serving the requested model by --balance.",
		// route's variables are VIGIL_ROUTE_*, run's VIGIL_*: route reads
		// only its own (commandEnv).
		Flags: commandEnv("route", append(append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8480", EnvVars: env("LISTEN"),
				Usage: "address of the gRPC worker API, host:port"},
			&cli.StringFlag{Name: "http-listen", Value: "127.0.0.1:8481", EnvVars: env("HTTP_LISTEN"),
				Usage: "address of the OpenAI-compatible HTTP API, host:port"},
			&cli.IntFlag{Name: "retries", Value: router.DefaultRetries, EnvVars: env("RETRIES"),
				Usage: "how many other workers a request tries when a worker refuses it (UNAVAILABLE, or RESOURCE_EXHAUSTED from --max-inflight) before its first token"},
			&cli.IntFlag{Name: "max-migrations", Value: router.DefaultMaxMigrations, EnvVars: env("MAX_MIGRATIONS"),
				Usage: "how many times one stream moves to another worker of its model when its worker cannot finish it (its engine lost, its vigil gone or out of grace), going on from the tokens already sent; 0: never, the client gets the failure"},
			&cli.StringFlag{Name: "balance", Value: string(router.PeakEWMA), EnvVars: env("BALANCE"),
				Usage: "how a request's worker is chosen among those serving its model: peak-ewma (the cheapest of three at random, cost = peak moving average of the time to first token x (requests outstanding + 1)), least-outstanding (the less loaded of two at random) or round-robin"},
			&cli.DurationFlag{Name: "request-timeout", Value: router.DefaultRequestTimeout, EnvVars: env("REQUEST_TIMEOUT"),
				Usage: "bound of a whole request, generation included"},
			&cli.Int64Flag{Name: "max-body-bytes", Value: router.DefaultMaxBodyBytes, EnvVars: env("MAX_BODY_BYTES"),
				Usage: "largest HTTP request body, in bytes; a larger one gets 413, as does a request over the workers' limit of " +
					strconv.Itoa(workerapi.MaxRequestBytes) + " bytes once encoded for them"},
			&cli.StringSliceFlag{Name: "model", EnvVars: env("MODEL"),
				Usage: "served model name whose requests get 503 and Retry-After, not 404, while no worker serves it (repeatable, or comma-separated); " +
					"a model seen in discovery is known for " + router.DefaultModelMemory.String() + " after its last worker left without it"},
			dryRunFlag("the Consul client's environment"),
		}, discoveryFlags("service name the workers are registered under")...),
			append(append(append(append(append(routeLifecycleFlags(), tlsFlags("both listeners")...), workerTLSFlags()...), apiKeyFlags()...), metricsFlags()...), logFlags()...)...)),
		Action:       routeAction,
		OnUsageError: onUsageError,
	}
}

// routeLifecycleFlags are route's flags for life behind a load balancer:
// heartbeats before a stream's first token, the idle timeout, and the
// shutdown's delay and grace period (named as vigil run's).
func routeLifecycleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "stream-heartbeat", Value: router.DefaultStreamHeartbeat, EnvVars: env("STREAM_HEARTBEAT"),
			Usage: "a streamed HTTP request without a first token this long gets 200 text/event-stream and an SSE comment (: keepalive), then one each interval until its first token, so that load balancers' read timeouts (nginx 60s, ALB and Cloudflare 100s) do not cut a long queue or prefill; a later failure is an error event (0: none, the status waits for the first token)"},
		&cli.DurationFlag{Name: "idle-timeout", Value: router.DefaultIdleTimeout, EnvVars: env("IDLE_TIMEOUT"),
			Usage: "how long an idle HTTP keep-alive connection stays open; keep it above the idle timeout of the load balancer in front (ALB: 60s by default), so that the balancer closes idle connections, never the router"},
		&cli.DurationFlag{Name: "shutdown-delay", EnvVars: env("SHUTDOWN_DELAY"),
			Usage: "after SIGTERM, report not serving (gRPC health NOT_SERVING, /health 503) at once but keep both listeners open and serving this long, for load balancers that learn of it late"},
		&cli.DurationFlag{Name: "grace-period", Value: router.DefaultDrainTimeout, EnvVars: env("GRACE_PERIOD"),
			Usage: "after the shutdown delay, how long requests in flight may finish once the listeners are closed; longer ones are cancelled (a second signal cancels them at once)"},
	}
}

// routeConfig is the validated form of route's flags.
type routeConfig struct {
	discoveryConfig
	log                logConfig
	listen, httpListen string
	retries            int
	maxMigrations      int
	balance            router.Balance
	requestTimeout     time.Duration
	lifecycle          routeLifecycle
	maxBodyBytes       int64
	models             []string
	metrics            metricsConfig
	tls                tlsconfig.ServerFiles
	workerTLS          *tlsconfig.ClientFiles // nil: plaintext
	apiKey, apiKeyFile string
}

func routeAction(c *cli.Context) error {
	signals, ignored, stop := subscribeSignals()
	defer stop()
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := parseRoute(c)
	if err != nil {
		return err
	}
	log := cfg.log.logger(c.App.ErrWriter)
	logIgnored(log, ignored)
	if cfg.apiKey, err = loadAPIKey(cfg.apiKey, cfg.apiKeyFile); err != nil {
		return err
	}
	b, err := newBackend(cfg.discoveryConfig)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		// The certificate files are checked as a start would; nothing listens.
		if _, err := loadServerTLS(cfg.tls, log); err != nil {
			return err
		}
		if _, err := loadWorkerTLS(cfg.workerTLS, log); err != nil {
			return err
		}
		return printResolved(c, c.App.Writer, nil)
	}
	return serveRoute(c.Context, cfg, b.discoverer(log.Named("discovery")), log, signals, nil)
}

// serveRoute listens on both addresses and runs the router until a
// signal; it returns the command's end (nil: exit 0). ready, if not nil, is
// called with the listening addresses once both servers accept.
func serveRoute(ctx context.Context, cfg routeConfig, src discovery.Discoverer, log hclog.Logger,
	signals <-chan os.Signal, ready func(grpcAddr, httpAddr net.Addr)) error {
	srvTLS, err := loadServerTLS(cfg.tls, log)
	if err != nil {
		return err
	}
	workerCreds, err := loadWorkerTLS(cfg.workerTLS, log)
	if err != nil {
		return err
	}
	glis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return exit(fmt.Errorf("--listen %s: %w", cfg.listen, err))
	}
	hlis, err := net.Listen("tcp", cfg.httpListen)
	if err != nil {
		glis.Close()
		return exit(fmt.Errorf("--http-listen %s: %w", cfg.httpListen, err))
	}
	if srvTLS != nil {
		hlis = tls.NewListener(hlis, httpTLS(srvTLS))
	}
	logSecurity(log, cfg, srvTLS != nil)
	proxy := router.ProxyConfig{Retries: cfg.retries, RequestTimeout: cfg.requestTimeout, MaxMigrations: cfg.maxMigrations}
	stopMetrics, err := serveRouteMetrics(cfg.metrics, &proxy, log)
	if err != nil {
		glis.Close()
		hlis.Close()
		return err
	}
	defer stopMetrics()
	srv := router.NewServer(router.ServerConfig{
		GRPCListener: glis, HTTPListener: hlis, GRPCOptions: grpcCreds(srvTLS), HTTPErrorLog: httpErrorLog(srvTLS, log),
		Source: src, Service: cfg.service,
		Pool:         router.PoolConfig{Models: cfg.models, Credentials: workerCreds, Balance: cfg.balance},
		Proxy:        proxy,
		HTTP:         router.HTTPConfig{MaxBodyBytes: cfg.maxBodyBytes, APIKey: cfg.apiKey, StreamHeartbeat: cfg.lifecycle.heartbeat},
		DrainTimeout: cfg.lifecycle.grace, ShutdownDelay: cfg.lifecycle.shutdownDelay, IdleTimeout: cfg.lifecycle.idle,
		Logger: log,
		Ready: func() {
			if ready != nil {
				ready(glis.Addr(), hlis.Addr())
			}
		},
	})
	return exitLogged(log, srv.Run(ctx, signals))
}

// parseRoute validates route's flags; every error names the flag and what
// it accepts.
func parseRoute(c *cli.Context) (routeConfig, error) {
	cfg := routeConfig{
		listen:         c.String("listen"),
		httpListen:     c.String("http-listen"),
		retries:        c.Int("retries"),
		maxMigrations:  c.Int("max-migrations"),
		balance:        router.Balance(c.String("balance")),
		requestTimeout: c.Duration("request-timeout"),
		maxBodyBytes:   c.Int64("max-body-bytes"),
		models:         c.StringSlice("model"),
	}
	var err error
	if cfg.discoveryConfig, err = parseDiscovery(c); err != nil {
		return cfg, err
	}
	if cfg.metrics, err = parseMetrics(c); err != nil {
		return cfg, err
	}
	if _, _, err := splitHostPort("listen", cfg.listen); err != nil {
		return cfg, err
	}
	if _, _, err := splitHostPort("http-listen", cfg.httpListen); err != nil {
		return cfg, err
	}
	if cfg.listen == cfg.httpListen {
		return cfg, usageErrorf("--http-listen %q: must differ from --listen", cfg.httpListen)
	}
	if cfg.maxMigrations < 0 {
		return cfg, usageErrorf("--max-migrations %d: must be 0 or more", cfg.maxMigrations)
	}
	if cfg.retries < 0 {
		return cfg, usageErrorf("--retries %d: must be 0 or more", cfg.retries)
	}
	if !slices.Contains(router.Balances, cfg.balance) {
		return cfg, usageErrorf("--balance %q: want peak-ewma, least-outstanding or round-robin", cfg.balance)
	}
	if cfg.requestTimeout <= 0 {
		return cfg, usageErrorf("--request-timeout %s: must be a positive duration such as 30s or 10m", cfg.requestTimeout)
	}
	if cfg.lifecycle, err = parseRouteLifecycle(c); err != nil {
		return cfg, err
	}
	if cfg.maxBodyBytes < 1 {
		return cfg, usageErrorf("--max-body-bytes %d: must be 1 or more", cfg.maxBodyBytes)
	}
	if err := checkRouteModels(cfg.models); err != nil {
		return cfg, err
	}
	if cfg.tls, err = parseTLS(c); err != nil {
		return cfg, err
	}
	if cfg.workerTLS, err = parseWorkerTLS(c); err != nil {
		return cfg, err
	}
	if cfg.apiKey, cfg.apiKeyFile, err = parseAPIKey(c); err != nil {
		return cfg, err
	}
	cfg.log, err = parseLog(c)
	return cfg, err
}

// checkRouteModels checks --model's names as the names workers register,
// as --served-model-name takes them.
func checkRouteModels(models []string) error {
	for _, m := range models {
		if m == "" {
			return usageErrorf("--model %q: must not be empty or blank; give a served model name", m)
		}
		if err := checkModelName(m); err != nil {
			return usageErrorf("--model %q: %v", m, err)
		}
	}
	return nil
}

// routeLifecycle is the validated form of routeLifecycleFlags.
type routeLifecycle struct {
	heartbeat, idle, shutdownDelay, grace time.Duration
}

// parseRouteLifecycle validates routeLifecycleFlags.
func parseRouteLifecycle(c *cli.Context) (routeLifecycle, error) {
	l := routeLifecycle{heartbeat: c.Duration("stream-heartbeat"), idle: c.Duration("idle-timeout"),
		shutdownDelay: c.Duration("shutdown-delay"), grace: c.Duration("grace-period")}
	for _, d := range []struct {
		flag     string
		v        time.Duration
		positive bool
	}{{"stream-heartbeat", l.heartbeat, false}, {"idle-timeout", l.idle, true},
		{"shutdown-delay", l.shutdownDelay, false}, {"grace-period", l.grace, true}} {
		switch {
		case d.positive && d.v <= 0:
			return l, usageErrorf("--%s %s: must be a positive duration such as 10s or 11m", d.flag, d.v)
		case d.v < 0:
			return l, usageErrorf("--%s %s: must be 0 (none) or a positive duration such as 15s", d.flag, d.v)
		}
	}
	return l, nil
}

// logSecurity logs once what secures the router: TLS on its listeners,
// to workers, and the API key (never the key itself); and warns when the
// key would cross the network in plaintext.
func logSecurity(log hclog.Logger, cfg routeConfig, listenTLS bool) {
	log.Info("router security", "tls", listenTLS, "mtls", cfg.tls.ClientCAFile != "",
		"worker_tls", cfg.workerTLS != nil, "worker_mtls", cfg.workerTLS != nil && cfg.workerTLS.CertFile != "",
		"api_key", cfg.apiKey != "")
	host, _, _ := net.SplitHostPort(cfg.httpListen)
	if ip := net.ParseIP(host); cfg.apiKey != "" && !listenTLS && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("the API key travels in plaintext on a non-loopback --http-listen: set --tls-cert-file and --tls-key-file, or terminate TLS in front",
			"http_listen", cfg.httpListen)
	}
}
