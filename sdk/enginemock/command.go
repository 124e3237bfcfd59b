package enginemock

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
)

// Command is the command line every mock engine shares. It serves gRPC on
// --listen and the control surface on --control, logs "listening" once both
// are open and "serving" once the engine is ready (test harnesses wait for
// these lines), and exits 0 after POST /stop, SIGTERM or SIGINT, 78 on bad
// flags (naming the flag and what it accepts) and 1 on other errors.
//
// Shared flags: --listen (default 127.0.0.1:50051), --control (default
// 127.0.0.1:50052), --model, --instance-id, --startup-delay, --token-delay
// (default 10ms), --step-interval (default 0: off; above 0 it replaces
// --token-delay with one engine-wide decode step) and --tokens-per-message
// (default 1), as in Config; --max-connection-age (default 0: off) and
// --max-connection-age-grace (default 1s), which recycle gRPC connections
// (Config.ServerOptions); and --reuseport, which listens with SO_REUSEPORT
// so that two mocks can share one port.
type Command struct {
	// Name is the command's name, as in "vllm-mock"; it prefixes errors.
	Name string
	// Usage is the one line --help shows under the name.
	Usage string
	// Serves lists what --listen serves, for its help, as in
	// "vllm.Inference, vllm.Control, grpc.health.v1".
	Serves string
	// Flags are the engine's own flags, after the shared ones.
	Flags []Flag
	// New builds the engine from the shared settings in cfg and the engine's
	// flags in c, before anything listens. It also returns key-value pairs
	// for the "listening" log line. A *BadFlag error exits 78 naming
	// the flag; other errors exit 1.
	New func(c *cli.Context, cfg Config) (e *Engine, logAttrs []any, err error)
}

// envStampTokens, set to 1, makes every output token the time its message
// was sent, Unix nanoseconds mod 2^31, instead of OutputToken's (stop
// tokens still act on OutputToken's): for vigil's own benchmark
// (bench/internal/load), which times each chunk from the engine to its
// client. Not part of the package's API.
const envStampTokens = "VIGIL_BENCH_STAMP_TOKENS"

// exitBadFlag is a mock's exit code for bad flags and arguments: 78,
// sysexits.h's EX_CONFIG, as vigil's own (not 2, which Go's runtime uses
// for a panic).
const exitBadFlag = 78

// Flag is an engine-specific flag of a Command.
type Flag struct {
	cli.Flag
	// Accepts says what the flag takes, for usage errors, as in
	// "one of normal, once".
	Accepts string
}

// BadFlag is the error Command.New returns for a flag value it rejects.
type BadFlag struct {
	Name  string // the flag's name, without dashes
	Value string // the value given
}

func (b *BadFlag) Error() string { return fmt.Sprintf("invalid value %q for --%s", b.Value, b.Name) }

// flags are the shared flags, then the engine's; new ones on each call, as
// urfave/cli keeps state in them.
func (cmd Command) flags() []Flag {
	return append([]Flag{
		{&cli.StringFlag{Name: "listen", Value: "127.0.0.1:50051", Usage: fmt.Sprintf("gRPC `ADDR` (%s)", cmd.Serves)}, "a host:port to listen on"},
		{&cli.StringFlag{Name: "control", Value: "127.0.0.1:50052", Usage: "`ADDR` of the JSON control surface (HTTP)"}, "a host:port to listen on"},
		{&cli.StringFlag{Name: "model", Value: "mock-model", Usage: "model `NAME` to report"}, "a model name"},
		{&cli.StringFlag{Name: "instance-id", Usage: "engine lifetime `ID` (default: fresh random, 16 hex chars)"}, "an instance id"},
		{&cli.DurationFlag{Name: "startup-delay", Usage: "how long health stays NOT_SERVING after start (`DUR`)"}, "a non-negative Go duration such as 0s, 500ms or 2m"},
		{&cli.DurationFlag{Name: "token-delay", Value: 10 * time.Millisecond, Usage: "pause between two stream messages (`DUR`)"}, "a non-negative Go duration such as 0s, 10ms or 1s"},
		{&cli.DurationFlag{Name: "step-interval", Usage: "decode step (`DUR`): every step, each stream in flight gets its next token; replaces --token-delay (0: off)"}, "a non-negative Go duration such as 0s, 10ms or 30ms"},
		{&cli.IntFlag{Name: "tokens-per-message", Value: 1, Usage: "output tokens per stream message (`N`)"}, "an integer from 1"},
		{&cli.DurationFlag{Name: "max-connection-age", Usage: "recycle each gRPC connection after `DUR` (GOAWAY, then closed after --max-connection-age-grace), as servers with MaxConnectionAge and proxies do (0: never)"}, "a non-negative Go duration such as 0s, 300ms or 5m"},
		{&cli.DurationFlag{Name: "max-connection-age-grace", Value: time.Second, Usage: "how long a recycled connection's streams may run on after its GOAWAY (`DUR`)"}, "a positive Go duration such as 300ms or 1s"},
		{&cli.BoolFlag{Name: "reuseport", Usage: "listen on --listen with SO_REUSEPORT, so two engines can share the port (Python gRPC servers' default)"}, "true or false"},
	}, cmd.Flags...)
}

// Main runs the command on os.Args, logging to stderr, and exits.
func (cmd Command) Main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := cmd.App(log).Run(os.Args)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, cmd.Name+":", err)
	os.Exit(exitCode(err))
}

// exitCode is the one place exit codes are decided: an ExitCoder's own, else 1.
func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// App is the command as a cli.App logging to log; its Run returns errors
// instead of exiting, with cli.ExitCoder for exit codes other than 1.
func (cmd Command) App(log *slog.Logger) *cli.App {
	var flags []cli.Flag
	for _, f := range cmd.flags() {
		flags = append(flags, f.Flag)
	}
	return &cli.App{
		Name:            cmd.Name,
		Usage:           cmd.Usage,
		HideVersion:     true,
		ExitErrHandler:  func(*cli.Context, error) {}, // Main decides exit codes
		OnUsageError:    cmd.usageError,
		HideHelpCommand: true,
		Flags:           flags,
		Action:          func(c *cli.Context) error { return cmd.run(c, log) },
	}
}

// usageError names the flag and what it accepts, and exits exitBadFlag.
func (cmd Command) usageError(_ *cli.Context, err error, _ bool) error {
	msg := err.Error()
	for _, f := range cmd.flags() {
		if name := f.Names()[0]; strings.Contains(msg, "-"+name+":") {
			return cli.Exit(fmt.Sprintf("%s; --%s accepts %s", msg, name, f.Accepts), exitBadFlag)
		}
	}
	return cli.Exit(msg+"; see --help", exitBadFlag)
}

func (cmd Command) badFlag(name, got string) error {
	var what string
	for _, f := range cmd.flags() {
		if f.Names()[0] == name {
			what = f.Accepts
		}
	}
	return cli.Exit(fmt.Sprintf("invalid value %q for --%s: want %s", got, name, what), exitBadFlag)
}

func (cmd Command) run(c *cli.Context, log *slog.Logger) error {
	eng, attrs, err := cmd.build(c)
	if err != nil {
		return err
	}
	defer eng.Stop() // at once when already stopped

	// Signals first, so one arriving during start still stops cleanly.
	ctx, stopSignals := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
	defer stopSignals()

	grpcLis, err := listenGRPC(c.Context, c.String("listen"), c.Bool("reuseport"))
	if err != nil {
		return fmt.Errorf("listening on --listen: %w", err)
	}
	ctlLis, err := net.Listen("tcp", c.String("control"))
	if err != nil {
		_ = grpcLis.Close()
		return fmt.Errorf("listening on --control: %w", err)
	}

	srv := &servers{http: &http.Server{Handler: eng.Handler(), ReadHeaderTimeout: 10 * time.Second},
		httpErr: make(chan error, 1), served: make(chan error, 1)}
	go func() { srv.httpErr <- srv.http.Serve(ctlLis) }()
	go func() { srv.served <- eng.Serve(grpcLis) }()
	st := eng.State()
	log.Info("listening", append([]any{"grpc", grpcLis.Addr().String(), "control", ctlLis.Addr().String(),
		"model", st.Model, "instance_id", st.InstanceID}, attrs...)...)
	return srv.wait(ctx, stopSignals, eng, log)
}

// build checks the shared flags and builds the engine from them.
func (cmd Command) build(c *cli.Context) (*Engine, []any, error) {
	if c.Args().Present() {
		return nil, nil, cli.Exit(fmt.Sprintf("unexpected argument %q; %s takes flags only", c.Args().First(), cmd.Name), exitBadFlag)
	}
	for _, name := range []string{"startup-delay", "token-delay", "step-interval", "max-connection-age"} {
		if d := c.Duration(name); d < 0 {
			return nil, nil, cmd.badFlag(name, d.String())
		}
	}
	if n := c.Int("tokens-per-message"); n < 1 {
		return nil, nil, cmd.badFlag("tokens-per-message", fmt.Sprint(n))
	}
	if d := c.Duration("max-connection-age-grace"); d <= 0 {
		return nil, nil, cmd.badFlag("max-connection-age-grace", d.String())
	}
	eng, attrs, err := cmd.New(c, Config{
		Model:            c.String("model"),
		InstanceID:       c.String("instance-id"),
		StartupDelay:     c.Duration("startup-delay"),
		TokenDelay:       c.Duration("token-delay"),
		StepInterval:     c.Duration("step-interval"),
		TokensPerMessage: c.Int("tokens-per-message"),
		ServerOptions:    recycleOptions(c.Duration("max-connection-age"), c.Duration("max-connection-age-grace")),
	})
	var bad *BadFlag
	if errors.As(err, &bad) {
		return nil, nil, cmd.badFlag(bad.Name, bad.Value)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("building the engine: %w", err)
	}
	if os.Getenv(envStampTokens) == "1" {
		eng.stamp.Store(true)
	}
	return eng, attrs, nil
}

// servers are a running mock's control surface and the ends of its two
// servers.
type servers struct {
	http            *http.Server
	httpErr, served chan error
}

// wait logs "serving" once the engine is ready and returns once the gRPC
// server has stopped (after a signal or POST /stop) or either server failed.
func (srv *servers) wait(ctx context.Context, stopSignals func(), eng *Engine, log *slog.Logger) error {
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
		case err := <-srv.httpErr:
			eng.Stop()
			<-srv.served
			return fmt.Errorf("serving control surface: %w", err)
		case err := <-srv.served:
			if err != nil {
				_ = srv.http.Close()
				return fmt.Errorf("serving gRPC: %w", err)
			}
			// Let a pending POST /stop answer before exiting.
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := srv.http.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("stopping control surface: %w", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}
