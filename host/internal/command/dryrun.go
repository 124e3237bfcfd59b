package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/builtin"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/supervisor"
)

// dryRunFlag is --dry-run of run and route. It has no environment
// variable: a VIGIL_DRY_RUN left in a unit's environment would make every
// start exit 0 at once, which a supervisor takes for a clean stop.
// checks says what the command checks beyond parsing its flags.
func dryRunFlag(checks string) cli.Flag {
	return &cli.BoolFlag{Name: "dry-run",
		Usage: "validate the flags and environment as a start would (" + checks + "), print the resolved configuration as JSON on stdout and exit 0, or exit 78 naming the flag; starts no engine, listener or registration"}
}

// redacted stands for the value of a secret flag that is set.
const redacted = "<redacted>"

// secretFlag reports whether a flag's value must not be printed.
func secretFlag(name string) bool {
	return strings.HasSuffix(name, "api-key") || strings.HasSuffix(name, "token") || strings.HasSuffix(name, "password")
}

// printResolved writes the command's configuration to w as one JSON
// object: a key for every flag of the command (but --dry-run and --help)
// holding its effective value, whether from the command line, the
// environment or the default (durations as Go duration strings, such as
// "1m30s"; lists as arrays; secrets as "<redacted>"), then resolved
// overrides those keys with values the command worked out (the worker id
// it defaulted to, say) and adds keys no flag has. Keys are sorted, so the
// output is stable.
func printResolved(c *cli.Context, w io.Writer, resolved map[string]any) error {
	out := map[string]any{}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if name == "dry-run" || name == "help" {
			continue
		}
		out[name] = flagValue(c, f, name)
		if secretFlag(name) && c.IsSet(name) {
			out[name] = redacted
		}
	}
	for k, v := range resolved {
		out[k] = v
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return exit(fmt.Errorf("printing the resolved configuration: %w", err))
	}
	if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
		return exit(fmt.Errorf("printing the resolved configuration: %w", err))
	}
	return nil
}

// flagValue is f's effective value, typed for JSON.
func flagValue(c *cli.Context, f cli.Flag, name string) any {
	switch f.(type) {
	case *cli.StringFlag, *cli.PathFlag:
		return c.String(name)
	case *cli.StringSliceFlag:
		return append([]string{}, c.StringSlice(name)...) // [] rather than null
	case *cli.DurationFlag:
		return c.Duration(name).String()
	case *cli.IntFlag:
		return c.Int(name)
	case *cli.Int64Flag:
		return c.Int64(name)
	case *cli.UintFlag:
		return c.Uint(name)
	case *cli.Float64Flag:
		return c.Float64(name)
	case *cli.BoolFlag:
		return c.Bool(name)
	default:
		return fmt.Sprint(c.Value(name))
	}
}

// runResolved is what vigil run works out beyond its flags' values, for
// --dry-run: the worker id and advertised address it defaulted to, the
// adapter it found, the registry, its shutdown budget and that of an
// engine's drain on purpose.
func runResolved(cfg runConfig, src adapterSource, registry discovery.Registry) map[string]any {
	adapter := "built in"
	if src.path != "" {
		adapter = src.path
	}
	r := map[string]any{
		"engine":          cfg.engine,
		"worker-id":       cfg.workerID,
		"advertise-addr":  net.JoinHostPort(cfg.advHost, strconv.Itoa(cfg.advPort)),
		"adapter":         adapter,
		"registry":        registry.String(),
		"shutdown-budget": supervisor.ShutdownBudget(cfg.shutdownDelay, cfg.grace).String(),
		// From an engine's drain on purpose, not from a signal.
		"engine-drain-budget": supervisor.EngineDrainBudget(cfg.drainTimeout).String(),
	}
	if src.sum != "" {
		r["adapter-sha256"] = src.sum
	}
	return r
}

// dryRunEnd ends vigil run --dry-run: it checks the adapter
// (dryRunAdapter) and prints the resolved configuration.
func dryRunEnd(c *cli.Context, cfg runConfig, src adapterSource, log hclog.Logger, resolved map[string]any) error {
	if err := dryRunAdapter(c.Context, cfg, src, log); err != nil {
		return exit(err)
	}
	return printResolved(c, c.App.Writer, resolved)
}

// dryRunAdapter checks the adapter as far as a start would without an
// engine: a built-in engine's options in process, as its Start would; a
// third-party adapter is started for the handshake and Info (its name
// checked against --engine) and stopped: only its Start can judge its
// options.
func dryRunAdapter(ctx context.Context, cfg runConfig, src adapterSource, log hclog.Logger) error {
	if src.path == "" {
		return supervisor.StartFailure(builtin.CheckOptions(src.engine, cfg.start.Options), cfg.start, namingFlags)
	}
	p, err := launchAdapter(ctx, src, cfg.adapter, log)
	if err != nil {
		return err
	}
	defer p.Kill()
	_, err = supervisor.ReadInfo(ctx, p.Engine, src.checkName)
	return err
}
