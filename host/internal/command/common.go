package command

import (
	"bytes"
	"io"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/logwriter"
	"github.com/vigilhq/vigil/sdk"
)

// env is the environment variable of a flag: VIGIL_<NAME>. A command
// whose variables have a prefix of their own reads them through
// commandEnv.
func env(name string) []string { return []string{envPrefix + name} }

const envPrefix = "VIGIL_"

// commandEnv gives every flag of command its own variables,
// VIGIL_<COMMAND>_<NAME> in place of the shared VIGIL_<NAME>: vigil
// route's VIGIL_ROUTE_LISTEN is not vigil run's VIGIL_LISTEN, and one
// environment can hold both. Every flag type of urfave/cli has an EnvVars
// field, set here by reflection so that flags added later get the prefix
// too.
func commandEnv(command string, flags []cli.Flag) []cli.Flag {
	prefix := envPrefix + strings.ToUpper(command) + "_"
	for _, f := range flags {
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		ev := v.Elem().FieldByName("EnvVars")
		if !ev.IsValid() || !ev.CanSet() || ev.Type() != reflect.TypeFor[[]string]() {
			continue
		}
		var vars []string
		for _, name := range ev.Interface().([]string) {
			if rest, ok := strings.CutPrefix(name, envPrefix); ok {
				name = prefix + rest
			}
			vars = append(vars, name)
		}
		ev.Set(reflect.ValueOf(vars))
	}
	return flags
}

// stopSignals stop vigil run and vigil route: withdraw, drain, exit 0.
// SIGHUP is one: a terminal that closes, systemd's SendSIGHUP= and
// supervisors' `kill -HUP` send it, and Go's default for it is to exit
// at once with 129, withdrawing nothing. SIGQUIT keeps Go's default
// (a goroutine dump, exit 2): it is how a hung vigil is debugged.
// The other signals a terminal or supervisor may send either are caught
// and ignored by Go's runtime (SIGUSR1, SIGUSR2, SIGWINCH, ...), stop the
// process (SIGTSTP, SIGTTIN, SIGTTOU: the TTL check then lapses), or are
// SIGPIPE, which keepOnBrokenPipe handles.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// subscribeSignals subscribes to stopSignals; commands call it before any
// slow work, so that a signal during start-up is seen. Those vigil was
// started with ignored are left out (see heededSignals) and returned in
// ignored, for the log. stop ends the subscription.
func subscribeSignals() (signals chan os.Signal, ignored []os.Signal, stop func()) {
	signals = make(chan os.Signal, 2)
	heeded, ignored := heededSignals()
	signal.Notify(signals, heeded...)
	return signals, ignored, func() { signal.Stop(signals) }
}

// heededSignals splits stopSignals into those vigil heeds and those it was
// started with ignored (SIGHUP under nohup, SIGINT in a shell's background
// job), which stay ignored, as the one who started vigil asked: subscribing
// to them would undo that. Only SIGHUP and SIGINT can be ignored at start
// (Go's runtime takes over every other signal), so heeded always holds
// SIGTERM.
func heededSignals() (heeded, ignored []os.Signal) {
	for _, sig := range stopSignals {
		if signal.Ignored(sig) {
			ignored = append(ignored, sig)
		} else {
			heeded = append(heeded, sig)
		}
	}
	return heeded, ignored
}

// logIgnored logs each stop signal vigil keeps ignoring.
func logIgnored(log hclog.Logger, ignored []os.Signal) {
	for _, sig := range ignored {
		log.Info("signal ignored: vigil was started with it ignored (as by nohup), and keeps it so", "signal", sig.String())
	}
}

// keepOnBrokenPipe keeps a write to a closed pipe from killing vigil. Go's
// runtime ends a program with SIGPIPE when a write to its stdout or stderr
// fails with EPIPE (a log reader that died), unless SIGPIPE is subscribed
// to: then the write returns the error, the log writer loses that entry
// alone, and the lifecycle carries on. The signal itself needs no handling, so the
// channel is never read (a full channel drops it). A subscription, not
// signal.Ignore, because an ignored SIGPIPE would be inherited by the
// adapter process across exec.
func keepOnBrokenPipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
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

// logger returns vigil's logger, writing to w. When w is Main's log
// writer, the count of entries it drops is logged in the same format.
func (l logConfig) logger(w io.Writer) hclog.Logger {
	if lw, ok := w.(*logwriter.Writer); ok {
		lw.SetNotice(l.droppedNotice)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "vigil", Level: l.level, JSONFormat: l.format == "json", Output: w})
	if l.format == "json" {
		return sdk.DurationStrings(log)
	}
	return log
}

// droppedNotice is the log entry that counts the entries the log writer
// dropped while the output took none; written at any --log-level, for it
// says that entries of that level are missing.
func (l logConfig) droppedNotice(dropped int) []byte {
	var b bytes.Buffer
	hclog.New(&hclog.LoggerOptions{Name: "vigil", Level: hclog.Trace, JSONFormat: l.format == "json", Output: &b}).
		Warn("log entries dropped: the log output was not taking them", "dropped", dropped)
	return b.Bytes()
}
