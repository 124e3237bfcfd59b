package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/adapter"
	"github.com/vigilhq/vigil/host/internal/supervisor"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// pluginCommand is `vigil plugin`, for third-party engine adapters.
func pluginCommand() *cli.Command {
	return &cli.Command{
		Name:  "plugin",
		Usage: "check a third-party engine adapter",
		Subcommands: []*cli.Command{{
			Name:      "check",
			ArgsUsage: "PATH",
			Usage: "start the adapter executable at PATH, complete the plugin handshake and print its name, version, protocol and capabilities; " +
				"with --engine-addr, also start it against that live engine, and with --conformance hold it to the sdk's conformance rules there. " +
				"Exits 0, 1 when a conformance rule fails, or 78 when vigil could not use the adapter",
			Flags: append(append([]cli.Flag{
				&cli.StringFlag{Name: "engine-addr",
					Usage: "a live engine's gRPC address, host:port: also start the adapter against it and report the worker and the first availability event"},
				&cli.StringSliceFlag{Name: "engine-option", Usage: "engine-specific adapter option, key=value (repeatable)"},
				&cli.DurationFlag{Name: "startup-deadline", Value: time.Minute,
					Usage: "with --engine-addr: how long to wait for the engine to serve"},
				&cli.BoolFlag{Name: "conformance",
					Usage: "with --engine-addr: run every conformance rule of the sdk (sdktest) that needs no hook against the adapter, started afresh for each, " +
						"and that engine, which must serve throughout; print each rule's outcome, the skipped ones by name; takes seconds to a minute, depending on the engine"},
			}, adapterFlags()...), logFlags()...),
			Action:       checkAction,
			OnUsageError: onUsageError,
		}},
	}
}

// checkConfig is the validated form of plugin check's flags.
type checkConfig struct {
	adapter     adapterConfig
	start       sdk.StartRequest // EngineAddr "": no live check
	log         logConfig
	conformance bool
}

func parseCheck(c *cli.Context) (checkConfig, error) {
	var cfg checkConfig
	var err error
	if c.Args().Len() != 1 {
		return cfg, usageErrorf("plugin check takes one argument, the adapter executable's PATH; got %d", c.Args().Len())
	}
	if cfg.adapter, err = parseAdapter(c); err != nil {
		return cfg, err
	}
	if cfg.log, err = parseLog(c); err != nil {
		return cfg, err
	}
	addr := c.String("engine-addr")
	cfg.conformance = c.Bool("conformance")
	if addr == "" {
		for _, f := range []string{"engine-option", "conformance"} {
			if c.IsSet(f) {
				return cfg, usageErrorf("--%s: needs --engine-addr, the engine to start the adapter against", f)
			}
		}
		return cfg, nil
	}
	if _, _, err := splitHostPort("engine-addr", addr); err != nil {
		return cfg, err
	}
	cfg.start = sdk.StartRequest{EngineAddr: addr, StartupDeadline: c.Duration("startup-deadline")}
	if cfg.start.StartupDeadline <= 0 {
		return cfg, usageErrorf("--startup-deadline %s: must be a positive duration such as 30s or 5m", cfg.start.StartupDeadline)
	}
	cfg.start.Options, err = parseEngineOptions(c)
	return cfg, err
}

// checkAction is `vigil plugin check PATH`.
func checkAction(c *cli.Context) error {
	heeded, _ := heededSignals()
	ctx, stop := signal.NotifyContext(c.Context, heeded...)
	defer stop()
	cfg, err := parseCheck(c)
	if err != nil {
		return err
	}
	path := c.Args().First()
	src, err := findPlugin(path, fmt.Sprintf("plugin check %q", path), cfg.adapter)
	if err != nil {
		return err
	}
	p, err := launchAdapter(ctx, src, cfg.adapter, cfg.log.logger(c.App.ErrWriter))
	if err != nil {
		return exit(err)
	}
	defer p.Kill()
	info, err := supervisor.ReadInfo(ctx, p.Engine, src.checkName)
	if err != nil {
		return exit(err)
	}
	printAdapter(c.App.Writer, src, info, p.Version)
	if cfg.start.EngineAddr == "" {
		return nil
	}
	if err := checkLive(ctx, c.App.Writer, p.Engine, cfg.start); err != nil || !cfg.conformance {
		return exit(err)
	}
	p.Kill() // each rule starts the adapter afresh
	return exit(checkConformance(ctx, c, cfg, src, info.Name))
}

// checkConformance runs the sdk's conformance rules (sdktest.Check) against
// the adapter at src and the engine of cfg.start, printing each rule's
// outcome as it ends: a skipped rule with what it needs, a failed one with
// what it found. A failed rule is an error.
func checkConformance(ctx context.Context, c *cli.Context, cfg checkConfig, src adapterSource, name string) error {
	w := c.App.Writer
	live := sdktest.Live{
		Name: name,
		Command: func() *exec.Cmd {
			cmd := exec.Command(src.path)
			cmd.Env = adapter.Env(os.Environ(), cfg.adapter.env)
			return cmd
		},
		EngineAddr: cfg.start.EngineAddr,
		Options:    cfg.start.Options,
	}
	if cfg.log.level <= hclog.Debug {
		live.AdapterLog = c.App.ErrWriter
	}
	fmt.Fprintln(w, "conformance   each rule against a new adapter process and the engine at "+cfg.start.EngineAddr)
	counts := map[sdktest.Outcome]int{}
	err := sdktest.Check(ctx, live, func(r sdktest.Result) {
		counts[r.Outcome]++
		printRule(w, r)
	})
	fmt.Fprintf(w, "conformance   %d passed, %d failed, %d skipped (each skip says what the rule needs; a Go test gives hooks with sdktest.TestEngine)\n",
		counts[sdktest.Passed], counts[sdktest.Failed], counts[sdktest.Skipped])
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}

// printRule prints one rule's outcome: the reason of a skip on its line,
// a failure's findings indented below it.
func printRule(w io.Writer, r sdktest.Result) {
	line := fmt.Sprintf("  %s  %-20s %s", r.Outcome, r.Rule, r.Elapsed.Round(10*time.Millisecond))
	if r.Outcome == sdktest.Skipped && len(r.Log) > 0 {
		line += "  " + r.Log[len(r.Log)-1]
	}
	fmt.Fprintln(w, line)
	if r.Outcome == sdktest.Failed {
		for _, l := range r.Log {
			fmt.Fprintln(w, "        "+l)
		}
	}
}

// printAdapter prints what the adapter reported, a field a line.
func printAdapter(w io.Writer, src adapterSource, info sdk.AdapterInfo, protocol int) {
	var caps []string
	for _, c := range []struct {
		name string
		on   bool
	}{{"readiness", info.Capabilities.Readiness}, {"generate", info.Capabilities.Generate}, {"abort", info.Capabilities.Abort}} {
		if c.on {
			caps = append(caps, c.name)
		}
	}
	if len(caps) == 0 {
		caps = []string{"none"}
	}
	fmt.Fprintf(w, "adapter       %s\nsha256        %s\nname          %s\nversion       %s\nprotocol      %d\ncapabilities  %s\n",
		src.path, src.sum, info.Name, info.Version, protocol, strings.Join(caps, ", "))
}

// firstEventTimeout bounds the wait for the first availability event,
// which is the engine's current state and so comes at once: the bound
// allows for a loaded machine.
const firstEventTimeout = 10 * time.Second

// checkLive starts the adapter against the engine and prints the worker
// and the first availability event, which must not be LOST; then it shuts
// the adapter down.
func checkLive(ctx context.Context, w io.Writer, e sdk.Engine, req sdk.StartRequest) error {
	worker, err := e.Start(ctx, req)
	if err := supervisor.StartFailure(err, req, namingFlags); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Shutdown(sctx)
	}()
	fmt.Fprintf(w, "worker        model=%s model_id=%s engine_version=%s instance_id=%s max_model_len=%d kv_block_size=%d text_input=%t\n",
		worker.ServedModelName, worker.ModelID, worker.EngineVersion, worker.InstanceID, worker.MaxModelLen, worker.KVBlockSize, worker.SupportsTextInput)
	wctx, cancel := context.WithTimeout(ctx, firstEventTimeout)
	defer cancel()
	events, err := e.WatchAvailability(wctx)
	if err != nil {
		return fmt.Errorf("watching the engine's availability: %w", err)
	}
	ev, ok := <-events
	if !ok {
		return fmt.Errorf("no availability event within %s: the first is due at once", firstEventTimeout)
	}
	fmt.Fprintf(w, "first event   %s (%s)\n", ev.Availability, ev.Reason)
	if ev.Availability != sdk.Serving && ev.Availability != sdk.NotReady {
		return fmt.Errorf("the engine is %s right after Start: %s", ev.Availability, ev.Reason)
	}
	return nil
}
