// Package command is vigil's command line: the App constructor, its flags
// and their validation, and the one place where exit codes are decided.
package command

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/sdk"
)

// ExitUsage is the exit code for bad flags or arguments.
const ExitUsage = 2

// Version is vigil's version, set at build time with
// -ldflags "-X github.com/vigilhq/vigil/host/internal/command.Version=...".
var Version = "dev"

// exitError ends vigil with a code; an empty message prints nothing.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// usageErrorf is a bad-input error: exit 2 with a message naming the flag.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// App returns vigil's command line application.
func App(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "vigil",
		Usage:   "keep service discovery honest for an LLM inference engine",
		Version: Version,
		Description: "vigil runs beside an inference engine (vLLM, SGLang, TensorRT-LLM), registers the\n" +
			"worker in discovery only while the engine serves, and withdraws it and exits 1 the\n" +
			"moment the engine is lost, so that its supervisor restarts it.",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands:  []*cli.Command{runCommand(), routeCommand(), versionCommand()},
		// Exit codes are decided in Main, not inside the library.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		},
		HideVersion: false,
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print vigil's version and plugin protocol version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "vigil %s (plugin protocol %d)\n", Version, sdk.ProtocolVersion)
			return nil
		},
	}
}

// Main runs vigil with args and returns its exit code: 0 after a clean
// stop, 1 when the engine is lost or never served, 2 for bad input.
func Main(args []string) int {
	err := App(os.Stdout, os.Stderr).Run(args)
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "vigil:", msg)
		}
		return ec.ExitCode()
	}
	// Anything else the CLI library returns is a usage error (unknown
	// command or flag, a value that does not parse).
	fmt.Fprintln(os.Stderr, "vigil:", err)
	return ExitUsage
}
