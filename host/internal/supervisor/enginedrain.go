package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/host/internal/outcome"
)

// The drain of an engine that drains on purpose (sdk.Draining: vLLM's
// shutdown grace period, SGLang's runtime): the worker is withdrawn at
// once and admits nothing, and the requests in flight run on while they
// make progress, each cut after StallTimeout without a chunk, all of them
// after DrainTimeout; then the adapter is shut down and vigil exits 1. A
// real loss or a stop meanwhile cuts the requests left after the grace
// period, as any drain does. The budget of this path is DrainTimeout +
// shutdownTail from the Draining event (EngineDrainBudget).
const (
	// DefaultDrainTimeout is the default --drain-timeout: vLLM's
	// --shutdown-timeout is the engine's own bound, and a long generation
	// takes minutes.
	DefaultDrainTimeout = 5 * time.Minute
	// DefaultStallTimeout is the default --stall-timeout: a decode step
	// takes milliseconds, a long prefill seconds.
	DefaultStallTimeout = 10 * time.Second
)

// drainTimeout is the Config's; the engine's drain runs only when it is
// set.
func (s *supervisor) drainTimeout() time.Duration { return s.cfg.DrainTimeout }

// stallTimeout is the Config's, or its default.
func (s *supervisor) stallTimeout() time.Duration {
	if s.cfg.StallTimeout > 0 {
		return s.cfg.StallTimeout
	}
	return DefaultStallTimeout
}

// noteDraining logs the engine's drain and records its outcome when it
// comes first: vigil exits 1 after it, as after a loss.
func (s *supervisor) noteDraining(reason string) {
	if s.cause != 0 || s.state == StateDraining {
		return
	}
	if s.cfg.WaitOnLoss {
		s.log.Warn("engine draining on purpose; withdrawn, letting the requests in flight finish; --on-loss=wait: then waiting for the engine again",
			"reason", reason, "drain_timeout", s.drainTimeout(), "stall_timeout", s.stallTimeout(), "startup_deadline", s.cfg.Start.StartupDeadline)
		return
	}
	s.log.Warn("engine draining on purpose; withdrawn, letting the requests in flight finish",
		"reason", reason, "drain_timeout", s.drainTimeout(), "stall_timeout", s.stallTimeout())
	s.outcome = fmt.Errorf("%w: engine drained: %s", outcome.ErrEngineLost, reason)
}

// budgetNow is the shutdown budget of the drain running: the engine's
// own until a loss or a stop shortens it.
func (s *supervisor) budgetNow() time.Duration {
	if s.cause == InputDraining && !s.shortened {
		return EngineDrainBudget(s.drainTimeout())
	}
	return s.shutdownBudget(s.delay())
}

// startEngineDrain holds the effects of entering StateEngineDraining: the
// endpoint stops admitting, and the engine's drain runs under its budget.
func (s *supervisor) startEngineDrain() {
	if s.stopPing != nil {
		s.stopPing() // as any drain does: the adapter still relays the streams
	}
	s.cfg.Endpoint.Admit(false, "worker draining: engine draining")
	s.drained = make(chan struct{})
	s.shorten = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancelDrain = cancel
	after := EngineDrainBudget(s.drainTimeout()) - killShare
	if s.budget > 0 {
		after = s.budget
	}
	s.overdue = time.After(after)
	go s.engineDrain(ctx)
}

// shortenDrain cuts the engine's drain to the grace period, from now: a
// real loss or a stop came. The budget is the grace period's.
func (s *supervisor) shortenDrain() {
	if s.shortened {
		return
	}
	s.shortened = true
	close(s.shorten)
	s.overdue = time.After(s.overdueAfter(0))
}

// engineDrain withdraws the worker, lets the requests in flight finish
// (Endpoint.Finish), shuts the adapter down and waits for the withdrawal,
// each step bounded; see the top of this file.
func (s *supervisor) engineDrain(ctx context.Context) {
	defer close(s.drained)
	defer s.cancelDrain()
	var unfinished []error
	finishCtx, cancel := context.WithTimeout(ctx, s.drainTimeout())
	defer cancel()
	withdrawn := s.withdraw(ctx, s.drainTimeout()+withdrawTail)
	shorten := s.shorten // this drain's: a recovery forgets it
	go func() {
		select {
		case <-shorten:
			t := time.AfterFunc(s.cfg.GracePeriod, cancel)
			<-finishCtx.Done()
			t.Stop()
		case <-finishCtx.Done():
		}
	}()
	if err := s.cfg.Endpoint.Finish(finishCtx, s.stallTimeout(), stepTimeout); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			s.log.Error("the requests cut were not all ended and aborted at the engine within their bound", "bound", stepTimeout, "error", err)
			unfinished = append(unfinished, fmt.Errorf("cutting the requests in flight: %w", err))
		} else {
			s.log.Warn("aborting the requests cut failed", "error", err)
		}
	} else if finishCtx.Err() == nil {
		s.log.Info("the requests in flight finished")
	}
	if err := s.shutdownAdapter(); err != nil {
		unfinished = append(unfinished, err)
	}
	s.killForRecovery()
	withdrawn()
	s.unfinished = errors.Join(unfinished...)
}

// withdraw withdraws the worker, off the drain, within bound; the wait it
// returns waits for that.
func (s *supervisor) withdraw(ctx context.Context, bound time.Duration) (wait func()) {
	deadline := time.Now().Add(bound)
	withdrawCtx, cancel := context.WithDeadline(ctx, deadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.cfg.Announcer.Withdraw(withdrawCtx); err != nil {
			s.log.Error("withdrawing the worker failed within the shutdown budget; discovery may list it until its TTL ends", "error", err)
		}
	}()
	return func() {
		defer cancel()
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.log.Error("the worker's withdrawal did not finish within the shutdown budget; discovery may list it until its TTL ends")
		case <-ctx.Done():
		}
	}
}
