package supervisor

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// A hung adapter: its process stopped (SIGSTOP), swapped out or its server
// wedged. go-plugin reports only an exit, and the availability watch of a
// hung adapter is silent, so its engine could die unseen while the worker
// stays registered and its requests hang. The lifecycle therefore pings
// the adapter (Adapter.Ping, go-plugin's health service) under the engine
// watch's policy: --health-failures pings in a row unanswered within
// --health-timeout, one every --health-interval, are InputHung. The worker
// is then withdrawn at once, its requests in flight end at once (the
// adapter could not relay their abort), and the adapter is killed rather
// than asked to shut down; the outcome is an engine loss.

// pingAdapter starts pinging the adapter, off the loop, until the drain
// begins; the channel delivers why it is taken for hung. Nil when the
// adapter has no Ping.
func (s *supervisor) pingAdapter() <-chan string {
	ping := s.plugin.Ping
	if ping == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopPing = cancel
	hung := make(chan string, 1) // Poll's goroutine never waits on the loop
	go func() {
		err := healthwatch.Poll(ctx, s.cfg.Start.Health, func(ctx context.Context) error {
			err := ping(ctx)
			if err != nil && sdk.ContextErr(ctx) == nil {
				// Not a hang but an exit or a broken connection, which
				// the availability watch reports as a loss.
				return nil
			}
			return err
		})
		if err != nil {
			hung <- "engine adapter not answering: " + err.Error()
		}
	}()
	return hung
}

// noteHung logs and records what a hung adapter means for the outcome: an
// engine loss, unless the lifecycle is ending for another cause already.
func (s *supervisor) noteHung(reason string) {
	select {
	case <-s.lost:
	default:
		close(s.lost) // a shutdown delay under way ends: nothing is served
	}
	if s.cause != 0 {
		s.log.Warn("the engine adapter stopped answering while draining", "reason", reason)
		return
	}
	if s.cfg.WaitOnLoss {
		s.log.Error("engine lost: the engine adapter stopped answering; --on-loss=wait: withdrawing, ending the requests in flight and killing the adapter, then restarting it and waiting for the engine again",
			"reason", reason, "startup_deadline", s.cfg.Start.StartupDeadline)
		return
	}
	s.log.Error("engine lost: the engine adapter stopped answering; withdrawing, ending the requests in flight and killing the adapter", "reason", reason)
	s.outcome = fmt.Errorf("%w: %s", outcome.ErrEngineLost, reason)
}

// killHung kills a hung adapter at once, beside the rest of the drain, and
// returns a channel closed once it has exited; nil when the adapter is not
// hung. Asking it to shut down would only wait out the step's bound.
func (s *supervisor) killHung() <-chan struct{} {
	if s.cause != InputHung {
		return nil
	}
	kill := s.plugin.KillNow
	if kill == nil {
		kill = s.plugin.Kill
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		if kill != nil {
			s.log.Warn("killing the engine adapter (SIGKILL): it does not answer")
			kill()
		}
	}()
	return killed
}
