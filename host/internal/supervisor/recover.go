package supervisor

import (
	"os"

	"github.com/vigilhq/vigil/sdk"
)

// Waiting again after a loss (Config.WaitOnLoss, --on-loss=wait): an
// engine lost (InputLost), an adapter that stopped answering (InputHung)
// or an engine's drain on purpose (InputDraining) unwinds as it would
// before an exit: withdrawn at once, the requests in flight drained (the
// grace period, or at once for a hung adapter), the adapter shut down or
// killed. Then, when no stop or failure came meanwhile, InputRecover takes
// the lifecycle back to Launching: the adapter is restarted, always, as a
// fresh adapter holds no state of the lost engine (its watch, its
// connection, its health policy's counts), and Waiting waits under the
// startup deadline, whose passing ends Run as at a first start. The new
// engine is registered as a fresh start registers one (its instance id,
// model, max length; the Tokenizer hook again; the endpoint attached
// again); the Announcer runs on. All the while the endpoint's liveness
// stays SERVING: vigil is not stopping, and a supervisor's liveness probe
// must not restart it. A stop signal during the drain lets it finish and
// ends Run with nil; a duplicate worker id still ends it with
// outcome.ErrConfig.

// lossCause reports whether the lifecycle unwinds for an engine loss:
// the cause of a drain that WaitOnLoss survives.
func (s *supervisor) lossCause() bool {
	return s.cause == InputLost || s.cause == InputHung || s.cause == InputDraining
}

// survives reports whether the drain running, or about to, ends in
// waiting for the engine again.
func (s *supervisor) survives() bool {
	return s.cfg.WaitOnLoss && s.lossCause() && !s.stopAsked && s.outcome == nil
}

// signal feeds a stop signal. During the drain of a loss that would be
// survived, it is the first signal, not a second: the drain finishes, and
// Run then returns nil instead of waiting again.
func (s *supervisor) signal(sig os.Signal) {
	if s.state != StateDraining || !s.survives() {
		s.step(InputStop, sig.String())
		return
	}
	s.stopAsked = true
	if s.cfg.Endpoint != nil {
		s.cfg.Endpoint.Stopping()
	}
	s.log.Info("signal received while draining after the engine loss; exiting once the drain ends instead of waiting for the engine again",
		"signal", sig.String(), "grace_period", s.cfg.GracePeriod)
}

// drainEnded feeds the end of the drain: InputRecover when it is survived.
func (s *supervisor) drainEnded() {
	if s.survives() {
		s.step(InputRecover, "")
		return
	}
	s.step(InputDrained, "")
}

// recoverCause is the Observer's cause of the loss survived.
func (s *supervisor) recoverCause() string {
	switch s.cause {
	case InputHung:
		return CauseHung
	case InputDraining:
		return CauseDraining
	}
	return CauseLost
}

// recover forgets the lost engine and its adapter (killed by the drain,
// see killForRecovery), so that Launching starts afresh.
func (s *supervisor) recover() {
	s.log.Warn("--on-loss=wait: waiting for the engine again, restarting the engine adapter",
		"cause", s.recoverCause(), "engine_addr", s.cfg.Start.EngineAddr, "startup_deadline", s.cfg.Start.StartupDeadline)
	if s.unfinished != nil {
		s.log.Warn("the drain abandoned steps at their bound; the adapter was killed", "error", s.unfinished)
	}
	s.cfg.Observer.Recovered(s.recoverCause())
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	if s.busy {
		s.busy = false
		s.cfg.Observer.Busy(false)
	}
	s.plugin, s.info, s.worker = Adapter{}, sdk.AdapterInfo{}, sdk.Worker{}
	s.started, s.events, s.tokenized, s.held, s.hung, s.stopPing = false, nil, nil, nil, nil, nil
	s.cause, s.outcome, s.unfinished = 0, nil, nil
	s.drained, s.overdue, s.shorten, s.shortened = nil, nil, nil, false
	s.lost = make(chan struct{})
}

// killForRecovery kills the adapter at the end of a loss's drain under
// WaitOnLoss, from the drain: the next is launched fresh. (Run kills it
// anyway when it returns; Kill is idempotent.)
func (s *supervisor) killForRecovery() {
	if s.cfg.WaitOnLoss && s.lossCause() && s.plugin.Kill != nil {
		s.plugin.Kill()
	}
}
