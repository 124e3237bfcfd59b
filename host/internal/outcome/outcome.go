// Package outcome names why a vigil command ended. The lifecycles behind
// `vigil run` (the supervisor) and `vigil route` (the router's server)
// return nil after a clean stop, or an error that wraps one of the
// sentinels below or is some other failure; the command package alone turns
// that into an exit code, from one table.
package outcome

import "errors"

// The reasons a command ends other than a clean stop. An error that wraps
// none of them is a failure a restart may cure: an adapter that would not
// start, an address in use.
var (
	// ErrConfig: the configuration is invalid (a flag, an argument, an
	// unwritable registry directory, an engine option the adapter
	// rejects), so restarting with it will not help.
	ErrConfig = errors.New("invalid configuration")
	// ErrEngineLost: the engine stopped serving after it had served, or its
	// adapter died or stopped answering; a restarted vigil waits for it
	// again.
	ErrEngineLost = errors.New("engine lost")
	// ErrStartupDeadline: the engine did not serve within the startup
	// deadline.
	ErrStartupDeadline = errors.New("engine did not serve within the startup deadline")
	// ErrDrainCut: a second stop signal ended the drain before the
	// requests in flight had finished.
	ErrDrainCut = errors.New("drain cut short by a second signal")
	// ErrShutdownBudget: the drain did not finish within its budget: a
	// step was abandoned at its own bound (vigil run: the engine did not
	// answer the abort of the requests the grace period cut, or the
	// adapter its Shutdown) or ignored it, and the command exited without
	// finishing it.
	ErrShutdownBudget = errors.New("shutdown budget exceeded")
)
