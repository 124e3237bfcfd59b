package command

import (
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/outcome"
)

// Exit codes of vigil run and vigil route.
const (
	// ExitOK: stopped by a signal, after draining.
	ExitOK = 0
	// ExitFailure: a failure that a restart may cure (engine lost, startup
	// deadline, adapter or listener failure, a drain cut short).
	ExitFailure = 1
	// ExitConfig is sysexits.h's EX_CONFIG: the configuration is invalid
	// and restarting will not help. Not 2, which Go's runtime also uses
	// when a program panics: a supervisor told not to restart on this code
	// must still restart a crashed vigil.
	ExitConfig = 78
	// ExitShutdownBudget: the drain outlived its budget and vigil exited
	// without finishing it. 124 as timeout(1) exits when time ran out
	// before the work did; apart from 1 so that an operator can tell a
	// clean drain from one that may leave the worker in discovery until
	// its TTL ends; below 126, 127 and 128+n, which shells give other
	// meanings; and outside sysexits' 64-78.
	ExitShutdownBudget = 124
)

// errOther marks the row of every error no other row names.
var errOther = errors.New("any other failure")

// exitCodes is the one table from why a command ended to its exit code:
// the first row whose err the outcome wraps (nil: a clean stop) decides.
// when is a phrase of the row for code in docs/operating.md's table;
// TestExitCodesMatchDocs holds the two tables together.
var exitCodes = []struct {
	err  error
	code int
	when string
}{
	{nil, ExitOK, "stopped by SIGTERM, SIGINT or SIGHUP"},
	// Before the rest: an invalid configuration stays one whatever
	// happened while unwinding.
	{outcome.ErrConfig, ExitConfig, "bad flags, arguments or commands"},
	{outcome.ErrShutdownBudget, ExitShutdownBudget, "shutdown budget"},
	{outcome.ErrEngineLost, ExitFailure, "engine lost"},
	{outcome.ErrStartupDeadline, ExitFailure, "engine not serving within `--startup-deadline`"},
	{outcome.ErrDrainCut, ExitFailure, "a signal during a drain cut it short (a second signal, or one during the drain after a loss)"},
	{errOther, ExitFailure, "adapter failed to start"},
}

// exitCode is the exit code for err, from exitCodes.
func exitCode(err error) int {
	for _, r := range exitCodes {
		switch {
		case r.err == nil && err == nil,
			r.err == errOther && err != nil,
			r.err != nil && errors.Is(err, r.err):
			return r.code
		}
	}
	return ExitFailure // not reached: errOther matches every error
}

// exitError is how a command ends other than cleanly: a cli.ExitCoder, as
// urfave/cli has it, whose code comes from exitCodes. An empty msg prints
// nothing (the command has logged why it ended).
type exitError struct {
	code int
	msg  string
	err  error
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }
func (e *exitError) Unwrap() error { return e.err }

// exit ends a command with err, printed by Main; nil is a clean stop.
func exit(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitCode(err), msg: err.Error(), err: err}
}

// exitLogged ends a command with the outcome of its lifecycle, which has
// logged why it ended: it logs the code and prints nothing more.
func exitLogged(log hclog.Logger, err error) error {
	code := exitCode(err)
	log.Info("exiting", "code", code)
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// configError is bad input; its message names the flag and what it
// accepts.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return outcome.ErrConfig }
