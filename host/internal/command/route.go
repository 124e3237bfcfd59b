package command

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/router"
)

// routeDrainTimeout is how long requests in flight may finish after a stop
// signal: long enough for most completions to end, short enough for a
// restart to stay quick; longer generations are cut off.
const routeDrainTimeout = 10 * time.Second

func routeCommand() *cli.Command {
	return &cli.Command{
		Name:  "route",
		Usage: "route gRPC and OpenAI-compatible HTTP requests to the workers found in discovery",
		Description: "route watches discovery for the workers of --service-name and serves the worker API\n" +
			"(vigil.worker.v1.Worker) on --listen and OpenAI-compatible completions on --http-listen,\n" +
			"round-robin over the workers serving the requested model.",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8480", EnvVars: env("LISTEN"),
				Usage: "address of the gRPC worker API, host:port"},
			&cli.StringFlag{Name: "http-listen", Value: "127.0.0.1:8481", EnvVars: env("HTTP_LISTEN"),
				Usage: "address of the OpenAI-compatible HTTP API, host:port"},
			&cli.IntFlag{Name: "retries", Value: router.DefaultRetries, EnvVars: env("RETRIES"),
				Usage: "how many other workers a request tries when a worker refuses it (UNAVAILABLE or RESOURCE_EXHAUSTED) before its first token"},
			&cli.DurationFlag{Name: "request-timeout", Value: router.DefaultRequestTimeout, EnvVars: env("REQUEST_TIMEOUT"),
				Usage: "bound of a whole request, generation included"},
			&cli.Int64Flag{Name: "max-body-bytes", Value: router.DefaultMaxBodyBytes, EnvVars: env("MAX_BODY_BYTES"),
				Usage: "largest HTTP request body, in bytes; a larger one gets 413"},
		}, discoveryFlags("service name the workers are registered under")...), logFlags()...),
		Action:       routeAction,
		OnUsageError: onUsageError,
	}
}

// routeConfig is the validated form of route's flags.
type routeConfig struct {
	discoveryConfig
	log                logConfig
	listen, httpListen string
	retries            int
	requestTimeout     time.Duration
	maxBodyBytes       int64
}

func routeAction(c *cli.Context) error {
	signals, stop := subscribeSignals()
	defer stop()
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := parseRoute(c)
	if err != nil {
		return err
	}
	log := cfg.log.logger(c.App.ErrWriter)
	var src router.Source
	switch cfg.discovery {
	case "consul":
		client, err := api.NewClient(api.DefaultConfig())
		if err != nil {
			return usageErrorf("--discovery consul: %v", err)
		}
		src = router.NewConsulSource(client.Health(), cfg.service, log.Named("discovery"))
	default:
		src = router.NewFileSource(cfg.registryDir, cfg.service, log.Named("discovery"))
	}
	return serveRoute(c.Context, cfg, src, log, signals, nil)
}

// serveRoute runs the router until a signal: it stops accepting, gives
// requests in flight routeDrainTimeout, and returns nil; a second signal
// cuts the drain short (exit 1). ready, if not nil, is called with the
// listening addresses once both servers accept.
func serveRoute(ctx context.Context, cfg routeConfig, src router.Source, log hclog.Logger,
	signals <-chan os.Signal, ready func(grpcAddr, httpAddr net.Addr)) error {
	glis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return exit(fmt.Errorf("--listen %s: %w", cfg.listen, err))
	}
	hlis, err := net.Listen("tcp", cfg.httpListen)
	if err != nil {
		glis.Close()
		return exit(fmt.Errorf("--http-listen %s: %w", cfg.httpListen, err))
	}

	pool := router.NewPool(log.Named("pool"))
	defer pool.Close()
	proxy := router.NewProxy(pool, router.ProxyConfig{
		Retries: cfg.retries, RequestTimeout: cfg.requestTimeout, Logger: log.Named("proxy"),
	})
	gs := router.NewGRPCServer(proxy)
	// Handlers run under base, which ends when the drain runs out.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           router.NewHTTPHandler(proxy, router.HTTPConfig{MaxBodyBytes: cfg.maxBodyBytes, Logger: log.Named("http")}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		src.Run(watchCtx, pool.Update)
	}()
	defer func() {
		stopWatch()
		<-watched
	}()

	failed := make(chan error, 2)
	go func() {
		if err := gs.Serve(glis); err != nil {
			failed <- fmt.Errorf("grpc server: %w", err)
		}
	}()
	go func() {
		if err := hs.Serve(hlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("http server: %w", err)
		}
	}()
	log.Info("router listening", "grpc", glis.Addr().String(), "http", hlis.Addr().String(),
		"discovery", src.String(), "service", cfg.service, "retries", cfg.retries)
	if ready != nil {
		ready(glis.Addr(), hlis.Addr())
	}

	code := 0
	select {
	case sig := <-signals:
		log.Info("stopping: no new requests; requests in flight may finish", "signal", sig.String(), "bound", routeDrainTimeout)
	case err := <-failed:
		log.Error("router failed; stopping", "error", err)
		code = ExitFailure
	}

	drain, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), routeDrainTimeout)
	defer cancelDrain()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		done := make(chan struct{})
		go func() {
			defer close(done)
			gs.Shutdown(drain)
		}()
		if err := hs.Shutdown(drain); err != nil {
			// The bound passed: end the requests still running.
			cancelBase()
			hs.Close()
		}
		<-done
	}()
	select {
	case <-drained:
		if drain.Err() != nil {
			log.Warn("drain bound passed; requests still in flight were cancelled", "bound", routeDrainTimeout)
		}
	case sig := <-signals:
		log.Warn("second signal: cancelling requests in flight", "signal", sig.String())
		cancelDrain()
		<-drained
		code = ExitFailure
	}
	log.Info("exiting", "code", code)
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// parseRoute validates route's flags; every error names the flag and what
// it accepts.
func parseRoute(c *cli.Context) (routeConfig, error) {
	cfg := routeConfig{
		listen:         c.String("listen"),
		httpListen:     c.String("http-listen"),
		retries:        c.Int("retries"),
		requestTimeout: c.Duration("request-timeout"),
		maxBodyBytes:   c.Int64("max-body-bytes"),
	}
	var err error
	if cfg.discoveryConfig, err = parseDiscovery(c); err != nil {
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
	if cfg.retries < 0 {
		return cfg, usageErrorf("--retries %d: must be 0 or more", cfg.retries)
	}
	if cfg.requestTimeout <= 0 {
		return cfg, usageErrorf("--request-timeout %s: must be a positive duration such as 30s or 10m", cfg.requestTimeout)
	}
	if cfg.maxBodyBytes < 1 {
		return cfg, usageErrorf("--max-body-bytes %d: must be 1 or more", cfg.maxBodyBytes)
	}
	cfg.log, err = parseLog(c)
	return cfg, err
}
