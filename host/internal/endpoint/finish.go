package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// Finish is Drain for an engine that drains on purpose: it stops admitting
// and returns once no request is in flight, letting those in flight run on
// while they make progress. A request that has sent no chunk for stall,
// counted from its last chunk or from the call, whichever is later (so a
// long prefill under way gets stall from the start of the drain), is cut
// alone: it ends with a final error (UNAVAILABLE, "no output within the
// stall timeout") and the engine aborts it. When ctx ends first, those
// left are cut as Drain cuts them, within cutTimeout, their final error
// saying the drain ended. Its error says what
// did not finish (wrapping context.DeadlineExceeded when time ran out) or
// that an abort failed.
func (s *Server) Finish(ctx context.Context, stall, cutTimeout time.Duration) error {
	s.Admit(false, "worker draining: engine draining")
	began := time.Now()
	var errs []error
	for {
		s.mu.Lock()
		idle := s.idle
		stalled, next := s.stalledLocked(began, stall)
		s.mu.Unlock()
		if idle == nil {
			return errors.Join(errs...)
		}
		if len(stalled) > 0 {
			if err := s.cutStalled(stalled, stall, cutTimeout); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-idle:
			t.Stop()
			return errors.Join(errs...)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(append(errs, s.cut(errDrainEnded, cutTimeout))...)
		}
	}
}

// stalledLocked returns the requests in flight, not cut yet, that have
// sent nothing for stall since the later of their last chunk and began,
// and when the next of the others would stall (far off when none would).
func (s *Server) stalledLocked(began time.Time, stall time.Duration) (stalled []*request, next time.Time) {
	now := time.Now()
	next = now.Add(stall)
	for _, r := range s.inflight {
		if r.cut {
			continue
		}
		last := time.Unix(0, r.progress.Load())
		if last.Before(began) {
			last = began
		}
		switch at := last.Add(stall); {
		case !at.After(now):
			stalled = append(stalled, r)
		case at.Before(next):
			next = at
		}
	}
	return stalled, next
}

// cutStalled ends the stalled requests and has the engine abort those
// forwarded to it, within timeout.
func (s *Server) cutStalled(stalled []*request, stall, timeout time.Duration) error {
	s.mu.Lock()
	var ids []string
	for _, r := range stalled {
		r.cut = true
		r.cancel(errStalled)
		ids = append(ids, r.engineIDs...)
	}
	engine := s.engine
	s.mu.Unlock()
	s.log.Warn("requests made no progress for the stall timeout while the engine drains; cutting them and aborting them at the engine",
		"requests", len(stalled), "stall_timeout", stall, "engine_request_ids", ids)
	if len(ids) == 0 || engine == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := within(ctx, func(ctx context.Context) error { return engine.Abort(ctx, ids) })
	switch {
	case err == nil, errors.Is(err, sdk.ErrUnimplemented):
		return nil
	case sdk.ContextErr(ctx) != nil:
		return fmt.Errorf("aborting %d stalled engine requests: no answer within %s: %w", len(ids), timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("aborting %d stalled engine requests: %w", len(ids), err)
}

// within calls f with ctx and returns its error, or ctx's once ctx ends
// first: an Abort that ignores its context is left behind.
func within(ctx context.Context, f func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
