package supervisor

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/sdk"
)

// Exit codes of vigil run.
const (
	// ExitOK: stopped by SIGTERM or SIGINT, drained.
	ExitOK = 0
	// ExitFailure: the engine was lost, did not serve within the startup
	// deadline, or the adapter could not be started; or a second signal cut
	// the drain short.
	ExitFailure = 1
	// ExitUsage: the adapter rejected its configuration (an engine option,
	// say) as invalid; restarting will not help.
	ExitUsage = 2
)

// adapterShutdownTimeout bounds the adapter's Shutdown call.
const adapterShutdownTimeout = 2 * time.Second

// minWithdrawTime is the least time a withdrawal gets to deregister,
// whatever the grace period: a grace period of 0 means "do not wait for
// requests", not "leave the worker registered".
const minWithdrawTime = 5 * time.Second

// withdrawTime is the bound of one withdrawal's retries.
func (s *supervisor) withdrawTime() time.Duration { return max(s.cfg.GracePeriod, minWithdrawTime) }

// Endpoint is the worker's request endpoint as the lifecycle drives it.
type Endpoint interface {
	// Attach gives the endpoint the engine to forward requests to, once
	// the engine serves.
	Attach(g sdk.Generator, w sdk.Worker)
	// Admit admits requests (true) or refuses them with reason (false),
	// and reports the same in the endpoint's gRPC health.
	Admit(admit bool, reason string)
	// Drain refuses new requests and returns when none is in flight, or
	// when ctx ends, after ending those still in flight.
	Drain(ctx context.Context)
}

// Adapter is a started engine adapter.
type Adapter struct {
	// Engine is the adapter's API.
	Engine sdk.Engine
	// Version is the negotiated plugin protocol version.
	Version int
	// Kill stops the adapter process; it must be idempotent.
	Kill func()
}

// FromPlugin adapts a launched go-plugin subprocess.
func FromPlugin(p *sdk.Plugin) Adapter {
	return Adapter{Engine: p.Engine, Version: p.Version, Kill: p.Kill}
}

// Config is what Run needs. All fields are required but ServedModelName,
// ShutdownDelay and ExplainRejected.
type Config struct {
	// Launch starts the adapter; it returns early with an error when ctx
	// ends.
	Launch func(ctx context.Context) (Adapter, error)
	// Start is passed to the adapter's Start.
	Start sdk.StartRequest
	// Registration has the service, worker id, engine name and advertised
	// address set; Run fills in what the engine reports.
	Registration discovery.Registration
	// ServedModelName, when set, replaces the served model name the engine
	// reports (--served-model-name), for engines that report only a path:
	// it is the name registered, logged and required of requests that
	// name a model. Empty: the engine's own.
	ServedModelName string
	// Announcer keeps the registration; Run runs it.
	Announcer *discovery.Announcer
	// Endpoint is the worker's request endpoint.
	Endpoint Endpoint
	// GracePeriod bounds the drain.
	GracePeriod time.Duration
	// ShutdownDelay keeps admitting requests this long after a stop
	// signal's withdrawal, while the engine serves, for load balancers that
	// learn of the withdrawal late (as Nomad's shutdown_delay). 0: none.
	ShutdownDelay time.Duration
	Logger        hclog.Logger

	// ExplainRejected, when set, rewrites the error of a Start that
	// rejected its configuration for the log: vigil run names the flag
	// behind the field at fault. Nil: the adapter's error as it is.
	ExplainRejected func(error) error
}

// Run runs the lifecycle until it stops and returns the exit code. signals
// delivers SIGTERM and SIGINT; the caller subscribes before Run so that no
// signal is lost during start-up.
func Run(ctx context.Context, cfg Config, signals <-chan os.Signal) int {
	s := &supervisor{cfg: cfg, log: cfg.Logger, state: StateStarting, lost: make(chan struct{})}
	return s.run(ctx, signals)
}

type supervisor struct {
	cfg    Config
	log    hclog.Logger
	plugin Adapter
	reg    discovery.Registration

	state       State
	cause       Input // InputLost or InputStop, whichever came first
	drained     chan struct{}
	cancelDrain context.CancelFunc
	lost        chan struct{} // closed on the first loss
}

func (s *supervisor) run(ctx context.Context, signals <-chan os.Signal) int {
	s.log.Info("starting engine adapter", "engine", s.cfg.Registration.Engine)
	p, code, ok := s.launch(ctx, signals)
	if !ok {
		return code
	}
	s.plugin = p
	defer p.Kill()
	info, err := p.Engine.Info(ctx)
	if err != nil {
		s.log.Error("reading adapter info failed", "error", err)
		return ExitFailure
	}
	s.log.Info("engine adapter started", "adapter", info.Name, "version", info.Version, "protocol", p.Version)

	worker, code, ok := s.waitForEngine(ctx, signals)
	if !ok {
		return code
	}
	// The override takes the engine's name's place everywhere from here:
	// the endpoint's model check, the registration and the log.
	servingArgs := []any{"model", worker.ServedModelName}
	if name := s.cfg.ServedModelName; name != "" {
		servingArgs = []any{"model", name, "engine_served_model_name", worker.ServedModelName}
		worker.ServedModelName = name
	}
	if g, ok := p.Engine.(sdk.Generator); ok && info.Capabilities.Generate {
		s.cfg.Endpoint.Attach(g, worker)
	}
	s.reg = s.cfg.Registration
	s.reg.Model, s.reg.ModelID, s.reg.InstanceID = worker.ServedModelName, worker.ModelID, worker.InstanceID
	s.reg.TokensOnly = !worker.SupportsTextInput
	s.log.Info("engine serving", append(servingArgs, "model_id", worker.ModelID,
		"instance_id", worker.InstanceID, "engine_version", worker.EngineVersion)...)

	annCtx, stopAnn := context.WithCancel(ctx)
	defer stopAnn()
	go s.cfg.Announcer.Run(annCtx)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := p.Engine.WatchAvailability(watchCtx)
	if err != nil {
		s.step(InputLost, "watching engine availability failed: "+err.Error())
	}

	for s.state != StateStopped {
		select {
		case sig := <-signals:
			if s.state == StateDraining {
				s.log.Warn("second signal: exiting without finishing the drain", "signal", sig.String())
				s.cancelDrain()
				return ExitFailure
			}
			s.log.Info("signal received; draining", "signal", sig.String(), "grace_period", s.cfg.GracePeriod)
			s.step(InputStop, "")
		case ev, ok := <-events:
			if !ok {
				events = nil
				if s.state != StateDraining {
					s.step(InputLost, "adapter closed the availability stream")
				}
				continue
			}
			switch ev.Availability {
			case sdk.Serving:
				s.step(InputServing, ev.Reason)
			case sdk.NotReady:
				s.step(InputNotReady, ev.Reason)
			default:
				events = nil
				s.step(InputLost, ev.Reason)
			}
		case <-s.drained:
			s.step(InputDrained, "")
		}
	}
	if s.cause == InputLost {
		return ExitFailure
	}
	return ExitOK
}

// launch starts the adapter, unless a signal comes first. ok is false when
// Run must return code.
func (s *supervisor) launch(ctx context.Context, signals <-chan os.Signal) (a Adapter, code int, ok bool) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		a   Adapter
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := s.cfg.Launch(lctx)
		done <- result{a, err}
	}()
	select {
	case sig := <-signals:
		s.log.Info("signal received while starting the adapter; exiting", "signal", sig.String())
		cancel()
		if r := <-done; r.err == nil {
			r.a.Kill()
		}
		return Adapter{}, ExitOK, false
	case r := <-done:
		if r.err != nil {
			s.log.Error("starting engine adapter failed", "error", r.err)
			return Adapter{}, ExitFailure, false
		}
		return r.a, 0, true
	}
}

// waitForEngine runs the adapter's Start until the engine serves, the
// startup deadline passes, or a signal arrives. ok is false when Run must
// return code.
func (s *supervisor) waitForEngine(ctx context.Context, signals <-chan os.Signal) (w sdk.Worker, code int, ok bool) {
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		w   sdk.Worker
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := s.plugin.Engine.Start(startCtx, s.cfg.Start)
		done <- result{w, err}
	}()
	s.log.Info("waiting for engine", "engine_addr", s.cfg.Start.EngineAddr, "startup_deadline", s.cfg.Start.StartupDeadline)
	select {
	case sig := <-signals:
		s.log.Info("signal received during the startup wait; exiting", "signal", sig.String())
		cancel()
		// A cancelled Start returns at once; an adapter that does not is
		// killed on return all the same.
		select {
		case <-done:
			s.shutdownAdapter()
		case <-time.After(adapterShutdownTimeout):
			s.log.Warn("adapter did not return from Start after cancellation")
		}
		return sdk.Worker{}, ExitOK, false
	case r := <-done:
		switch {
		case r.err == nil:
			return r.w, 0, true
		case errors.Is(r.err, sdk.ErrStartupDeadline):
			s.log.Error("engine did not serve within the startup deadline", "startup_deadline", s.cfg.Start.StartupDeadline, "error", r.err)
		case errors.Is(r.err, sdk.ErrInvalidArgument):
			err := r.err
			if s.cfg.ExplainRejected != nil {
				err = s.cfg.ExplainRejected(err)
			}
			s.log.Error("the engine adapter rejected its configuration", "error", err)
			s.shutdownAdapter()
			return sdk.Worker{}, ExitUsage, false
		default:
			s.log.Error("waiting for the engine failed", "error", r.err)
		}
		s.shutdownAdapter()
		return sdk.Worker{}, ExitFailure, false
	}
}

// step feeds one input to the lifecycle.
func (s *supervisor) step(in Input, reason string) {
	if in == InputLost {
		select {
		case <-s.lost:
		default:
			close(s.lost)
		}
		if s.cause == 0 {
			s.log.Error("engine lost", "reason", reason)
		} else {
			s.log.Info("engine stopped serving while draining, as expected after a stop", "reason", reason)
		}
	}
	if (in == InputLost || in == InputStop) && s.cause == 0 {
		s.cause = in
	}
	to := next(s.state, in)
	if to == s.state {
		return
	}
	s.log.Info("lifecycle", "from", s.state.String(), "to", to.String(), "input", in.String(), "reason", reason)
	s.state = to
	s.enter(to)
}

// enter holds the effects of entering a state.
func (s *supervisor) enter(st State) {
	switch st {
	case StateServing:
		s.cfg.Announcer.Announce(s.reg)
		s.cfg.Endpoint.Admit(true, "")
	case StateNotReady:
		s.cfg.Endpoint.Admit(false, "worker not ready: the engine is asleep or paused")
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.withdrawTime())
			defer cancel()
			if err := s.cfg.Announcer.Withdraw(ctx); err != nil {
				s.log.Error("withdrawing the not-ready worker failed", "error", err)
			}
		}()
	case StateDraining:
		delay := time.Duration(0)
		if s.cause == InputStop {
			delay = s.cfg.ShutdownDelay
		}
		if delay == 0 {
			s.cfg.Endpoint.Admit(false, s.refusal())
		}
		s.drained = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		s.cancelDrain = cancel
		go s.drain(ctx, delay)
	}
}

// refusal is what refused clients are told while draining.
func (s *supervisor) refusal() string {
	if s.cause == InputLost {
		return "worker draining: engine lost"
	}
	return "worker draining"
}

// drain withdraws the worker at once; after the shutdown delay (or at once
// when the engine is lost) it stops admitting and lets requests in flight
// finish within the grace period; then it shuts the adapter down.
func (s *supervisor) drain(ctx context.Context, delay time.Duration) {
	defer close(s.drained)
	defer s.cancelDrain()
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
	s.shutdownAdapter()
}

func (s *supervisor) shutdownAdapter() {
	ctx, cancel := context.WithTimeout(context.Background(), adapterShutdownTimeout)
	defer cancel()
	if err := s.plugin.Engine.Shutdown(ctx); err != nil && !errors.Is(err, sdk.ErrPluginExited) {
		s.log.Warn("adapter shutdown failed", "error", err)
	}
}
