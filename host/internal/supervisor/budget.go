package supervisor

import "time"

// ShutdownBudget is the most vigil run takes from a stop signal to its
// exit: the shutdown delay + the grace period + 2 s (see the drain's
// diagram). A supervisor's stop timeout (systemd's TimeoutStopSec, Nomad's
// kill_timeout) must be longer, or it kills vigil mid-drain.
func ShutdownBudget(shutdownDelay, gracePeriod time.Duration) time.Duration {
	return shutdownDelay + gracePeriod + shutdownTail
}

// EngineDrainBudget is the most vigil run takes, from an engine's drain on
// purpose (sdk.Draining) to its exit: the drain timeout + 2 s. A stop
// signal during it shortens what is left to the shutdown budget of a stop
// with no shutdown delay (the worker is withdrawn already): the grace
// period + 2 s from the signal.
func EngineDrainBudget(drainTimeout time.Duration) time.Duration {
	return drainTimeout + shutdownTail
}
