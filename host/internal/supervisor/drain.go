package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// The shutdown budget: from the moment the drain begins (a stop signal, an
// engine loss, a failed startup) vigil exits within the shutdown delay +
// the grace period + shutdownTail, whatever hangs. The withdrawal runs
// beside the delay and the grace period; what follows them is bounded
// step by step, each step abandoned (and logged) at its bound:
//
//	|<- delay ->|<- grace period ->|<- cut ->|<- Shutdown ->|<- kill ->|   exit
//	|<--------------------- withdrawal ------------------->|
//	                               |<----------- shutdownTail (2s) ----------->|
//
// The cut, the adapter's Shutdown and its kill get stepTimeout each; the
// withdrawal ends withdrawTail after the grace period; the rest is slack
// for vigil's own exit. A startup phase running when the drain begins
// takes the cut's place: it gets stepTimeout to return once cancelled.
// The overdue timer, at the budget less the kill's share, catches a step
// that ignored its bound.
const (
	// shutdownTail is what the shutdown budget allows beyond the shutdown
	// delay and the grace period: the cut requests' abort, the adapter's
	// Shutdown, the adapter process's exit and vigil's own.
	shutdownTail = 2 * time.Second
	// stepTimeout bounds each step of the tail: the cut (requests in
	// flight ended and the engine's Abort answered), the adapter's
	// Shutdown, the adapter process's graceful exit before it is killed,
	// and a cancelled startup phase's return. An engine or adapter that
	// answers at all answers in milliseconds.
	stepTimeout = 500 * time.Millisecond
	// withdrawTail is how long the withdrawal may go on after the grace
	// period, beside the cut and the adapter's Shutdown: with a grace
	// period of 0 it is all the withdrawal gets. A backend that answers
	// deregisters in milliseconds; one that does not leaves the worker to
	// its TTL, logged.
	withdrawTail = 2 * stepTimeout
	// killShare is the part of the budget kept, after the overdue timer,
	// for killing the adapter and exiting.
	killShare = stepTimeout
)

// delay is how long the drain keeps admitting after the withdrawal: the
// shutdown delay after a stop signal once the worker may be registered,
// else none.
func (s *supervisor) delay() time.Duration {
	if s.cause == InputStop && s.started {
		return s.cfg.ShutdownDelay
	}
	return 0
}

// shutdownBudget is the most the drain and the exit after it take: the
// shutdown delay + the grace period + shutdownTail.
func (s *supervisor) shutdownBudget(delay time.Duration) time.Duration {
	return delay + s.cfg.GracePeriod + shutdownTail
}

// overdueAfter is when the drain is abandoned: the budget less killShare.
// (Tests shorten it.)
func (s *supervisor) overdueAfter(delay time.Duration) time.Duration {
	if s.budget > 0 {
		return s.budget
	}
	return s.shutdownBudget(delay) - killShare
}

// startDrain holds the effects of entering StateDraining: the endpoint
// stops admitting (after the delay, if any) and the drain runs, under its
// budget.
func (s *supervisor) startDrain() {
	delay := s.delay()
	if s.stopPing != nil {
		s.stopPing()
	}
	switch {
	case delay == 0 && s.started && s.cause == InputHung:
		s.cfg.Endpoint.Abandon(s.refusal())
	case delay == 0 && s.started:
		s.cfg.Endpoint.Admit(false, s.refusal())
	}
	s.drained = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancelDrain = cancel
	s.overdue = time.After(s.overdueAfter(delay))
	p := s.phase
	s.phase = nil // the drain's now
	go s.drain(ctx, p, delay)
}

// refusal is what refused clients are told while draining.
func (s *supervisor) refusal() string {
	switch s.cause {
	case InputLost:
		return "worker draining: engine lost"
	case InputHung:
		return "worker draining: engine adapter not answering"
	}
	return "worker draining"
}

// drain unwinds what the lifecycle has started, whatever phase it is in: a
// startup phase running is cancelled; a worker that may be registered is
// withdrawn and drained, the requests the grace period cuts aborted at the
// engine; an adapter is shut down. A step abandoned at its bound is
// recorded in s.unfinished, which the loop reads once drained closes.
func (s *supervisor) drain(ctx context.Context, p *phase, delay time.Duration) {
	defer close(s.drained)
	defer s.cancelDrain()
	var unfinished []error
	shutdown := s.plugin.Engine != nil
	killed := s.killHung()
	if killed != nil {
		shutdown = false // it would not answer
	}
	if p != nil {
		if err := s.cancelPhase(p); err != nil {
			unfinished = append(unfinished, err)
			shutdown = false
		}
	}
	withdrawn := func() {}
	if s.started {
		var err error
		if withdrawn, err = s.drainWorker(ctx, delay); err != nil {
			unfinished = append(unfinished, err)
		}
	}
	if shutdown {
		if err := s.shutdownAdapter(); err != nil {
			unfinished = append(unfinished, err)
		}
	}
	if killed != nil {
		<-killed
	}
	s.killForRecovery()
	withdrawn()
	s.unfinished = errors.Join(unfinished...)
}

// drainWorker withdraws the worker at once; after the shutdown delay (or at
// once when the engine is lost) it stops admitting and lets requests in
// flight finish within the grace period, then cuts those left and has the
// engine abort them. It returns once they are cut (an error when that did
// not finish in time), and wait, which waits for the withdrawal up to
// withdrawTail after the grace period.
func (s *supervisor) drainWorker(ctx context.Context, delay time.Duration) (wait func(), err error) {
	deadline := time.Now().Add(delay + s.cfg.GracePeriod + withdrawTail)
	withdrawCtx, cancel := context.WithDeadline(ctx, deadline)
	withdrawn := make(chan struct{})
	go func() {
		defer close(withdrawn)
		if err := s.cfg.Announcer.Withdraw(withdrawCtx); err != nil {
			s.log.Error("withdrawing the worker failed within the shutdown budget; discovery may list it until its TTL ends", "error", err)
		}
	}()
	wait = func() {
		defer cancel()
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-withdrawn:
		case <-t.C:
			// The announcer may be held by a backend call that ignores
			// the deadline; the exit does not wait for it.
			s.log.Error("the worker's withdrawal did not finish within the shutdown budget; discovery may list it until its TTL ends")
		case <-ctx.Done():
		}
	}
	if delay > 0 {
		s.log.Info("withdrawn; admitting requests for the shutdown delay", "shutdown_delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.lost:
		case <-ctx.Done():
		}
		t.Stop()
	}
	graceCtx, cancelGrace := context.WithTimeout(ctx, s.cfg.GracePeriod)
	defer cancelGrace()
	if err := s.cfg.Endpoint.Drain(graceCtx, stepTimeout); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			s.log.Error("the requests the grace period cut were not all ended and aborted at the engine within their bound", "bound", stepTimeout, "error", err)
			return wait, fmt.Errorf("cutting the requests in flight: %w", err)
		}
		s.log.Warn("aborting the requests the grace period cut failed", "error", err)
	}
	return wait, nil
}

// shutdownAdapter asks the adapter to release the engine, within
// stepTimeout; an error when it did not answer in time. An adapter that
// has exited has nothing to release.
func (s *supervisor) shutdownAdapter() error {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	err := within(ctx, s.plugin.Engine.Shutdown)
	switch {
	case err == nil, errors.Is(err, sdk.ErrPluginExited):
		return nil
	case sdk.ContextErr(ctx) != nil:
		s.log.Error("the adapter did not shut down within its bound; killing it", "bound", stepTimeout, "error", err)
		return fmt.Errorf("shutting the adapter down: %w", context.DeadlineExceeded)
	default:
		s.log.Warn("adapter shutdown failed", "error", err)
		return nil
	}
}

// within calls f with ctx and returns its error, or ctx's as soon as ctx
// ends if f has not returned: a call that ignores its context is left
// behind rather than waited for. An error from f once ctx's deadline has
// passed wraps context.DeadlineExceeded: the adapter enforces the deadline
// it was sent too, and its error can beat ctx's own timer on a busy
// machine (sdk.ContextErr).
func within(ctx context.Context, f func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		if err != nil && sdk.ContextErr(ctx) != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
