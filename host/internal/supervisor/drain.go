package supervisor

import (
	"context"
	"errors"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// adapterShutdownTimeout bounds the adapter's Shutdown call, and the wait
// for a cancelled startup phase to return.
const adapterShutdownTimeout = 2 * time.Second

// minWithdrawTime is the least time a withdrawal gets to deregister,
// whatever the grace period: a grace period of 0 means "do not wait for
// requests", not "leave the worker registered".
const minWithdrawTime = 5 * time.Second

// shutdownSlack is what the shutdown budget allows beyond the sum of the
// drain's own bounds: a busy machine's delays, and a backend call that holds
// the announcer when the withdrawal begins (2s at most). Past it a step has
// ignored its bound, and waiting longer would not help.
const shutdownSlack = 5 * time.Second

// withdrawTime is the bound of one withdrawal's retries.
func (s *supervisor) withdrawTime() time.Duration { return max(s.cfg.GracePeriod, minWithdrawTime) }

// delay is how long the drain keeps admitting after the withdrawal: the
// shutdown delay after a stop signal once the worker may be registered,
// else none.
func (s *supervisor) delay() time.Duration {
	if s.cause == InputStop && s.started {
		return s.cfg.ShutdownDelay
	}
	return 0
}

// shutdownBudget bounds the whole drain: a startup phase's return, the
// shutdown delay, the withdrawal (which outlasts the grace period), the
// adapter's shutdown, and slack.
func (s *supervisor) shutdownBudget(delay time.Duration) time.Duration {
	if s.budget > 0 {
		return s.budget
	}
	return adapterShutdownTimeout + delay + s.withdrawTime() + adapterShutdownTimeout + shutdownSlack
}

// startDrain holds the effects of entering StateDraining: the endpoint
// stops admitting (after the delay, if any) and the drain runs, under its
// budget.
func (s *supervisor) startDrain() {
	delay := s.delay()
	if delay == 0 && s.started {
		s.cfg.Endpoint.Admit(false, s.refusal())
	}
	s.drained = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancelDrain = cancel
	s.overdue = time.After(s.shutdownBudget(delay))
	p := s.phase
	s.phase = nil // the drain's now
	go s.drain(ctx, p, delay)
}

// refusal is what refused clients are told while draining.
func (s *supervisor) refusal() string {
	if s.cause == InputLost {
		return "worker draining: engine lost"
	}
	return "worker draining"
}

// drain unwinds what the lifecycle has started, whatever phase it is in: a
// startup phase running is cancelled; a worker that may be registered is
// withdrawn and drained; an adapter is shut down.
func (s *supervisor) drain(ctx context.Context, p *phase, delay time.Duration) {
	defer close(s.drained)
	defer s.cancelDrain()
	shutdown := s.plugin.Engine != nil
	if p != nil {
		shutdown = s.cancelPhase(p) && shutdown
	}
	if s.started {
		s.drainWorker(ctx, delay)
	}
	if shutdown {
		s.shutdownAdapter()
	}
}

// drainWorker withdraws the worker at once; after the shutdown delay (or at
// once when the engine is lost) it stops admitting and lets requests in
// flight finish within the grace period.
func (s *supervisor) drainWorker(ctx context.Context, delay time.Duration) {
	withdrawCtx, cancel := context.WithTimeout(ctx, delay+s.withdrawTime())
	defer cancel()
	withdrawn := make(chan struct{})
	go func() {
		defer close(withdrawn)
		if err := s.cfg.Announcer.Withdraw(withdrawCtx); err != nil {
			s.log.Error("withdrawing the worker failed within the grace period", "error", err)
		}
	}()
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
	s.cfg.Endpoint.Drain(graceCtx)
	<-withdrawn
}

func (s *supervisor) shutdownAdapter() {
	ctx, cancel := context.WithTimeout(context.Background(), adapterShutdownTimeout)
	defer cancel()
	if err := s.plugin.Engine.Shutdown(ctx); err != nil && !errors.Is(err, sdk.ErrPluginExited) {
		s.log.Warn("adapter shutdown failed", "error", err)
	}
}
