// Command vllm-mock runs a stand-in vLLM engine (package mock): gRPC on
// --listen, the JSON control surface on --control. It exits 0 after POST
// /stop, SIGTERM or SIGINT, 2 on bad flags and 1 on other errors.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vigilhq/vigil/plugins/vllm/mock"
)

// accepts says what each flag takes, for usage errors.
var accepts = map[string]string{
	"listen":             "a host:port to listen on",
	"control":            "a host:port to listen on",
	"model":              "a model name",
	"instance-id":        "an instance id",
	"startup-delay":      "a non-negative Go duration such as 0s, 500ms or 2m",
	"token-delay":        "a non-negative Go duration such as 0s, 10ms or 1s",
	"tokens-per-message": "an integer from 1",
	"health-watch":       "one of normal, once, unimplemented, silent",
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := app(log).Run(os.Args)
	if err == nil {
		return
	}
	// Exit codes are decided here only.
	code := 1
	if ec, ok := err.(cli.ExitCoder); ok {
		code = ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "vllm-mock:", err)
	os.Exit(code)
}

func app(log *slog.Logger) *cli.App {
	return &cli.App{
		Name:            "vllm-mock",
		Usage:           "a stand-in vLLM engine serving vLLM's gRPC API",
		HideVersion:     true,
		ExitErrHandler:  func(*cli.Context, error) {}, // main decides exit codes
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:50051", Usage: "gRPC `ADDR` (vllm.Inference, vllm.Control, grpc.health.v1)"},
			&cli.StringFlag{Name: "control", Value: "127.0.0.1:50052", Usage: "`ADDR` of the JSON control surface (HTTP)"},
			&cli.StringFlag{Name: "model", Value: "mock-model", Usage: "model `NAME` to report"},
			&cli.StringFlag{Name: "instance-id", Usage: "engine lifetime `ID` (default: fresh random, 16 hex chars)"},
			&cli.DurationFlag{Name: "startup-delay", Usage: "how long health stays NOT_SERVING after start (`DUR`)"},
			&cli.DurationFlag{Name: "token-delay", Value: 10 * time.Millisecond, Usage: "pause between two stream messages (`DUR`)"},
			&cli.IntFlag{Name: "tokens-per-message", Value: 1, Usage: "output tokens per stream message (`N`)"},
			&cli.StringFlag{Name: "health-watch", Value: string(mock.WatchNormal), Usage: "Health/Watch behaviour: normal, once, unimplemented or silent (`MODE`)"},
		},
		Action: func(c *cli.Context) error { return run(c, log) },
	}
}

// usageError names the flag and what it accepts, and exits 2.
func usageError(_ *cli.Context, err error, _ bool) error {
	msg := err.Error()
	for name, what := range accepts {
		if strings.Contains(msg, "-"+name+":") {
			return cli.Exit(fmt.Sprintf("%s; --%s accepts %s", msg, name, what), 2)
		}
	}
	return cli.Exit(msg+"; see --help", 2)
}

func badFlag(name, got string) error {
	return cli.Exit(fmt.Sprintf("invalid value %q for --%s: want %s", got, name, accepts[name]), 2)
}

func run(c *cli.Context, log *slog.Logger) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("unexpected argument %q; vllm-mock takes flags only", c.Args().First()), 2)
	}
	mode, err := mock.ParseWatchMode(c.String("health-watch"))
	if err != nil {
		return badFlag("health-watch", c.String("health-watch"))
	}
	for _, name := range []string{"startup-delay", "token-delay"} {
		if d := c.Duration(name); d < 0 {
			return badFlag(name, d.String())
		}
	}
	if n := c.Int("tokens-per-message"); n < 1 {
		return badFlag("tokens-per-message", fmt.Sprint(n))
	}

	// Signals first, so one arriving during start still stops cleanly.
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
	defer stopSignals()

	grpcLis, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return fmt.Errorf("listening on --listen: %w", err)
	}
	ctlLis, err := net.Listen("tcp", c.String("control"))
	if err != nil {
		_ = grpcLis.Close()
		return fmt.Errorf("listening on --control: %w", err)
	}

	eng := mock.New(mock.Config{
		Model:            c.String("model"),
		InstanceID:       c.String("instance-id"),
		StartupDelay:     c.Duration("startup-delay"),
		TokenDelay:       c.Duration("token-delay"),
		TokensPerMessage: c.Int("tokens-per-message"),
		WatchMode:        mode,
	})
	httpSrv := &http.Server{Handler: eng.Handler(), ReadHeaderTimeout: 10 * time.Second}
	httpErr := make(chan error, 1)
	go func() { httpErr <- httpSrv.Serve(ctlLis) }()
	served := make(chan error, 1)
	go func() { served <- eng.Serve(grpcLis) }()
	st := eng.State()
	log.Info("listening", "grpc", grpcLis.Addr().String(), "control", ctlLis.Addr().String(),
		"model", st.Model, "instance_id", st.InstanceID, "health_watch", string(mode))

	ready := eng.Ready()
	for {
		select {
		case <-ready:
			log.Info("serving")
			ready = nil
		case <-ctx.Done():
			log.Info("stopping", "reason", "signal")
			stopSignals()
			go eng.Stop()
			ctx = context.Background() // fire once
		case err := <-httpErr:
			eng.Stop()
			<-served
			return fmt.Errorf("serving control surface: %w", err)
		case err := <-served:
			if err != nil {
				_ = httpSrv.Close()
				return fmt.Errorf("serving gRPC: %w", err)
			}
			// Let a pending POST /stop answer before exiting.
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := httpSrv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("stopping control surface: %w", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}
