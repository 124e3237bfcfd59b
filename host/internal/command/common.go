package command

import (
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

func env(name string) []string { return []string{"VIGIL_" + name} }

// subscribeSignals subscribes to SIGTERM and SIGINT; commands call it before
// any slow work, so that a signal during start-up is seen. stop ends the
// subscription.
func subscribeSignals() (signals chan os.Signal, stop func()) {
	signals = make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	return signals, func() { signal.Stop(signals) }
}

// noArgs refuses positional arguments to a command that takes none.
func noArgs(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return usageErrorf("%s takes no arguments, got %q", c.Command.Name, c.Args().First())
	}
	return nil
}

// discoveryFlags are the flags that choose the registry, shared by run and
// route; serviceUsage says what the service name means to the command.
func discoveryFlags(serviceUsage string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "discovery", Value: "file", EnvVars: env("DISCOVERY"),
			Usage: "discovery backend: file or consul (consul honours CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN and the other standard variables)"},
		&cli.StringFlag{Name: "registry-dir", Value: defaultRegistryDir(), EnvVars: env("REGISTRY_DIR"),
			Usage: "directory of the file registry"},
		&cli.StringFlag{Name: "service-name", Value: "llm", EnvVars: env("SERVICE_NAME"), Usage: serviceUsage},
	}
}

// discoveryConfig is the validated form of discoveryFlags.
type discoveryConfig struct {
	discovery, registryDir, service string
}

func parseDiscovery(c *cli.Context) (discoveryConfig, error) {
	d := discoveryConfig{discovery: c.String("discovery"), registryDir: c.String("registry-dir"), service: c.String("service-name")}
	switch d.discovery {
	case "file":
		if d.registryDir == "" {
			return d, usageErrorf("--registry-dir: must not be empty with --discovery file")
		}
	case "consul":
	default:
		return d, usageErrorf("--discovery %q: want file or consul", d.discovery)
	}
	if !validName(d.service) {
		return d, usageErrorf("--service-name %q: %s", d.service, nameRule)
	}
	return d, nil
}

// Service names and worker ids become Consul ids and file names: letters,
// digits and . _ : - only, starting with a letter or digit (so no path
// escapes and no hidden files).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

const nameRule = "want letters, digits and . _ : - only, starting with a letter or digit"

func validName(s string) bool { return namePattern.MatchString(s) }

// logFlags are the logging flags of every long-running command.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("LOG_FORMAT"),
			Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: env("LOG_LEVEL"),
			Usage: "log level: trace, debug, info, warn or error"},
	}
}

// logConfig is the validated form of logFlags.
type logConfig struct {
	format string
	level  hclog.Level
}

func parseLog(c *cli.Context) (logConfig, error) {
	l := logConfig{format: c.String("log-format"), level: hclog.LevelFromString(strings.ToLower(c.String("log-level")))}
	if l.format != "text" && l.format != "json" {
		return l, usageErrorf("--log-format %q: want text or json", l.format)
	}
	if l.level == hclog.NoLevel {
		return l, usageErrorf("--log-level %q: want trace, debug, info, warn or error", c.String("log-level"))
	}
	return l, nil
}

// logger returns vigil's logger, writing to w.
func (l logConfig) logger(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "vigil", Level: l.level, JSONFormat: l.format == "json", Output: w})
}
