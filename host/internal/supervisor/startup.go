package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// phase is a startup step that blocks (launching the adapter, waiting for
// the engine), run beside the select loop so that a signal is seen at once.
// The loop takes its result when done closes; a drain that begins first
// takes the phase instead, cancels it and unwinds what it did.
type phase struct {
	state  State // the lifecycle's when it began
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed once the fields below are set

	adapter Adapter // launching: the adapter, when err is nil
	info    sdk.AdapterInfo
	worker  sdk.Worker // waiting: what Start reported, when err is nil
	err     error
}

// startPhase runs work as the current startup phase.
func (s *supervisor) startPhase(work func(ctx context.Context, p *phase)) {
	ctx, cancel := context.WithCancel(s.ctx)
	p := &phase{state: s.state, began: time.Now(), cancel: cancel, done: make(chan struct{})}
	s.phase = p
	go func() {
		defer close(p.done)
		work(ctx, p)
	}()
}

// phaseDone is the running phase's done channel; nil (never ready) when
// none runs.
func (s *supervisor) phaseDone() <-chan struct{} {
	if s.phase == nil {
		return nil
	}
	return s.phase.done
}

// endPhase feeds the result of the phase that has returned.
func (s *supervisor) endPhase() {
	p := s.phase
	s.phase = nil
	p.cancel()
	switch {
	case p.err != nil:
		s.log.Error(failure(p.err), "state", s.state.String(), "error", p.err)
		s.outcome = p.err
		s.step(InputFailed, p.err.Error())
	case s.state == StateLaunching:
		s.plugin, s.info = p.adapter, p.info
		s.step(InputLaunched, "")
	default:
		s.worker = p.worker
		s.cfg.Observer.EngineStarted(time.Since(p.began))
		s.step(InputStarted, "")
	}
}

// failure is the log message of a startup failure.
func failure(err error) string {
	switch {
	case errors.Is(err, outcome.ErrStartupDeadline):
		return "engine did not serve within the startup deadline"
	case errors.Is(err, outcome.ErrConfig) && errors.Is(err, sdk.ErrInvalidArgument):
		return "the engine adapter rejected its configuration"
	case errors.Is(err, outcome.ErrConfig):
		return "the engine adapter cannot be used"
	default:
		return "startup failed"
	}
}

// launch starts the adapter and reads what it is. An adapter up after ctx
// has ended is killed: nothing else would.
func (s *supervisor) launch(ctx context.Context) (Adapter, sdk.AdapterInfo, error) {
	a, err := s.cfg.Launch(ctx)
	if err != nil {
		return Adapter{}, sdk.AdapterInfo{}, fmt.Errorf("starting the engine adapter: %w", err)
	}
	info, err := ReadInfo(ctx, a.Engine, s.cfg.CheckAdapter)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		a.Kill()
		return Adapter{}, sdk.AdapterInfo{}, err
	}
	s.log.Info("engine adapter started", "adapter", info.Name, "version", info.Version, "protocol", a.Version)
	return a, info, nil
}

// ReadInfo reads what the adapter e is and, when check is set, checks it.
// Info is required of every adapter: one that answers it as unimplemented
// (as the sdk does for a capability claimed and not implemented) is a
// configuration error.
func ReadInfo(ctx context.Context, e sdk.Engine, check func(sdk.AdapterInfo) error) (sdk.AdapterInfo, error) {
	info, err := e.Info(ctx)
	switch {
	case errors.Is(err, sdk.ErrUnimplemented):
		return info, fmt.Errorf("%w: the engine adapter's Info: %w", outcome.ErrConfig, err)
	case err != nil:
		return info, fmt.Errorf("reading the adapter's info: %w", err)
	case check != nil:
		return info, check(info)
	}
	return info, nil
}

// start waits, through the adapter's Start, until the engine serves.
func (s *supervisor) start(ctx context.Context, engine sdk.Engine) (sdk.Worker, error) {
	w, err := engine.Start(ctx, s.cfg.Start)
	return w, StartFailure(err, s.cfg.Start, s.cfg.ExplainRejected)
}

// StartFailure is the error of a Start of req that returned err (nil:
// none), saying whether a restart may help: a rejected configuration
// wraps outcome.ErrConfig, rewritten by explain when it is set; the
// startup deadline outcome.ErrStartupDeadline.
func StartFailure(err error, req sdk.StartRequest, explain func(error) error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sdk.ErrStartupDeadline):
		return fmt.Errorf("%w (%s): %w", outcome.ErrStartupDeadline, req.StartupDeadline, err)
	case errors.Is(err, sdk.ErrInvalidArgument):
		if explain != nil {
			err = explain(err)
		}
		return fmt.Errorf("%w: %w", outcome.ErrConfig, err)
	default:
		return fmt.Errorf("waiting for the engine: %w", err)
	}
}

// cancelPhase ends a phase a drain has taken. A cancelled phase returns at
// once; one that does not within stepTimeout is left behind, its adapter
// killed when Run returns, and cancelPhase says so: the adapter is then not
// asked to shut down.
func (s *supervisor) cancelPhase(p *phase) error {
	p.cancel()
	t := time.NewTimer(stepTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		if p.adapter.Kill != nil {
			p.adapter.Kill() // launched as the stop came
		}
		return nil
	case <-t.C:
		s.log.Error("the adapter did not return within its bound after cancellation; killing it", "state", p.state.String(), "bound", stepTimeout)
		return fmt.Errorf("cancelling the %s phase: %w", p.state, context.DeadlineExceeded)
	}
}
