package supervisor

import "time"

// ShutdownBudget is the most vigil run takes from a stop signal to its
// exit: the shutdown delay + the grace period + 2 s (see the drain's
// diagram). A supervisor's stop timeout (systemd's TimeoutStopSec, Nomad's
// kill_timeout) must be longer, or it kills vigil mid-drain.
func ShutdownBudget(shutdownDelay, gracePeriod time.Duration) time.Duration {
	return shutdownDelay + gracePeriod + shutdownTail
}
