// Package command is vigil's command line: the App constructor, its flags
// and their validation, and the one place where exit codes are decided.
package command

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/logwriter"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// Version is vigil's version, set at build time with
// -ldflags "-X github.com/vigilhq/vigil/host/internal/command.Version=...".
var Version = "dev"

// usageErrorf is a bad-input error: exit ExitConfig with a message naming
// the flag.
func usageErrorf(format string, args ...any) error {
	return exit(&configError{msg: fmt.Sprintf(format, args...)})
}

// App returns vigil's command line application.
func App(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "vigil",
		Usage:   "keep service discovery honest for an LLM inference engine",
		Version: Version,
		Description: "vigil runs beside an inference engine (built in: vLLM, SGLang and TensorRT-LLM;\n" +
			"others as plugins), registers the worker in discovery only while the engine serves,\n" +
			"and withdraws it and exits 1 the moment the engine is lost, so that its supervisor\n" +
			"restarts it.",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands:  []*cli.Command{runCommand(), routeCommand(), pluginCommand(), versionCommand()},
		// Exit codes are decided in Main, not inside the library.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		HideVersion:    false,
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print vigil's version and plugin protocol version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "vigil %s (plugin protocol %d)\n", Version, pluginhost.ProtocolVersion)
			return nil
		},
	}
}

// Main runs vigil with args and returns its exit code, from exitCodes: 0
// after a clean stop, 1 when the engine is lost or never served, 78 for
// bad input.
func Main(args []string) int {
	keepOnBrokenPipe()
	// The log goes to stderr through a writer that never blocks: a log
	// output that stalls or breaks must not hold up the lifecycle or its
	// exit code. The standard log package (net/http's, say) goes there too.
	stderr := logwriter.New(os.Stderr, logwriter.DefaultMaxQueued)
	defer stderr.Close(logStall)
	stdlog := log.Writer()
	log.SetOutput(stderr)
	defer log.SetOutput(stdlog)
	app := App(os.Stdout, stderr)
	unknown := ""
	app.CommandNotFound = func(_ *cli.Context, name string) { unknown = name }
	err := app.Run(args)
	if unknown != "" {
		err = usageErrorf("unknown command %q; commands: run, route, plugin, version, help", unknown)
	}
	var ec cli.ExitCoder
	if err != nil && !errors.As(err, &ec) {
		// Anything else the CLI library returns is a usage error (unknown
		// command or flag, a value that does not parse).
		err = usageErrorf("%v", err)
	}
	if err != nil && err.Error() != "" {
		fmt.Fprintln(stderr, "vigil:", err)
	}
	return exitCode(err)
}

// logStall is how long vigil, exiting, waits on a log output that takes
// no entry before it gives up on the entries still queued: an output that
// stalled must not keep vigil from exiting with its code, and one that
// takes writes at all takes vigil's last few lines well within it.
const logStall = 500 * time.Millisecond

// invalidValue matches the flag package's parse errors, such as
// `invalid value "soon" for flag -grace-period: parse error`.
var invalidValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([a-z0-9-]+): `)

// onUsageError turns the CLI library's parse errors into vigil's form:
// exit ExitConfig, the flag as it is written, and what it accepts.
func onUsageError(c *cli.Context, err error, _ bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		return usageErrorf("unknown flag --%s; see vigil %s --help", name, c.Command.Name)
	}
	m := invalidValue.FindStringSubmatch(err.Error())
	if m == nil {
		return usageErrorf("%v", err)
	}
	value, name := m[1], m[2]
	want := "a valid value"
	for _, f := range c.Command.Flags {
		if !slices.Contains(f.Names(), name) {
			continue
		}
		switch f.(type) {
		case *cli.DurationFlag:
			want = "a duration such as 500ms, 30s or 5m"
		case *cli.IntFlag, *cli.Int64Flag:
			want = "a whole number"
		case *cli.BoolFlag:
			want = "true or false"
		}
	}
	return usageErrorf("--%s %q: want %s", name, value, want)
}
