package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// Spec is the engine's own half of an adapter built on the kit: its
// description, its health signals and how to read what it reports.
type Spec struct {
	// Info describes the adapter, as sdk.Engine.Info returns it. Info.Name
	// is required.
	Info sdk.AdapterInfo
	// Engine names the engine in reasons and errors, e.g. "vLLM". Default
	// Info.Name.
	Engine string
	// Options lists the engine option keys (vigil's --engine-option
	// key=value) the adapter accepts; Start rejects any other key.
	Options []string
	// Signals returns the engine's health signals over conn for one Start,
	// given its engine options. Start waits until every one serves; the
	// watch follows all but Startup ones. It runs inside the startup wait,
	// under a deadline of HealthPolicy.Timeout, so it may ask the engine
	// which API it serves: an error is retried
	// like a failed check until it succeeds or the startup deadline passes,
	// except one wrapping sdk.ErrInvalidArgument (a bad option value: an
	// *sdk.FieldError for sdk.FieldOptions naming the key), which ends Start
	// at once. Required.
	Signals func(ctx context.Context, conn *grpc.ClientConn, options map[string]string) ([]Signal, error)
	// CheckOptions checks the engine options' values, given only known
	// keys: Start calls it once CheckStart found no unknown key (the
	// likelier typo, so reported first), before it dials the engine. A bad
	// value is an *sdk.FieldError for sdk.FieldOptions naming the key,
	// value first (`max-tokens="many": want a number`). Optional; a value
	// that only the engine can judge is checked in Signals.
	CheckOptions func(options map[string]string) error
	// ReadWorker reads what the engine reports about itself, once every
	// signal serves, under a deadline of InfoTimeout. Its errors reach the
	// host as sdk.ErrUnavailable. Required unless ReadWorkerFor is set.
	ReadWorker func(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error)
	// ReadWorkerFor is ReadWorker given Start's request, for an adapter
	// whose worker depends on an engine option (req.Options). Set, it is
	// called instead of ReadWorker.
	ReadWorkerFor func(ctx context.Context, conn *grpc.ClientConn, req sdk.StartRequest) (sdk.Worker, error)
	// LifetimeID reads the engine's lifetime id again (what ReadWorker
	// returned as sdk.Worker.InstanceID). With it, and a non-empty id from
	// ReadWorker, a reconnect to the engine is followed by a read, and a
	// different id is Lost, and a HealthService Watch reopened after a
	// recycled connection reports nothing until its own read answers;
	// without it the connection closing after Start is Lost at once. See
	// LifetimeSource.
	LifetimeID func(ctx context.Context, conn *grpc.ClientConn) (string, error)
}

// InfoTimeout bounds Spec.ReadWorker after the engine serves: reading a few
// fields takes milliseconds, but an engine under load may be slow to
// answer.
const InfoTimeout = 10 * time.Second

// Adapter implements sdk.Engine for an engine reached over gRPC, from a
// Spec. An adapter embeds it and adds what is its engine's own, such as
// sdk.Generator with Relay over Conn. Create it with New.
//
// Start checks the request (CheckStart), dials the engine once (Dial), and
// waits within the startup deadline until every signal serves; when any
// step fails it closes the connection and leaves the Adapter as it was, so
// Start may be called again. WatchAvailability merges the signals and the
// connection's lifetime (Merge, LifetimeSource). Shutdown aborts the
// generations still in flight (InFlight) and closes the connection.
type Adapter struct {
	spec  Spec
	clock healthwatch.Clock
	log   hclog.Logger

	mu      sync.Mutex
	conn    *grpc.ClientConn // from dial until a failed Start or Shutdown
	started bool             // Start succeeded
	policy  sdk.HealthPolicy
	signals []Signal
	worker  sdk.Worker
	seen    *instances            // the engine processes Start met
	pings   *healthwatch.PingConn // from a successful Start until Shutdown
	busy    *healthwatch.Busy

	inflight InFlight
}

var _ sdk.Engine = (*Adapter)(nil)

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock of the startup wait's backoff; tests use a fake
// one. Default healthwatch.SystemClock.
func WithClock(c healthwatch.Clock) Option { return func(a *Adapter) { a.clock = c } }

// WithLogger sets the logger of the startup wait's progress. Default
// sdk.Logger(), whose entries reach the host's log.
func WithLogger(l hclog.Logger) Option { return func(a *Adapter) { a.log = l } }

// WaitLogInterval is how often Start logs that it is still waiting for the
// engine, with the last check's error: at its first failed check and then
// once per interval, so that a wrong engine address is seen at once and
// not only at the startup deadline.
const WaitLogInterval = 30 * time.Second

// New returns an Adapter for spec.
func New(spec Spec, opts ...Option) *Adapter {
	if spec.Engine == "" {
		spec.Engine = spec.Info.Name
	}
	a := &Adapter{spec: spec, clock: healthwatch.SystemClock{}}
	for _, o := range opts {
		o(a)
	}
	if a.log == nil {
		a.log = sdk.Logger()
	}
	return a
}

// Info returns Spec.Info; it does not touch the engine.
func (a *Adapter) Info(context.Context) (sdk.AdapterInfo, error) { return a.spec.Info, nil }

// CheckOptions checks engine options as Start does, without an engine:
// an unknown key (Spec.Options), then the values (Spec.CheckOptions). An
// error is an *sdk.FieldError for sdk.FieldOptions naming the key. A host
// that runs the adapter in process calls it to check a configuration (as
// vigil run --dry-run does for its built-in engines); a value that only
// the engine can judge is not checked.
func (a *Adapter) CheckOptions(options map[string]string) error {
	if err := checkOptionKeys(options, a.spec.Options); err != nil {
		return err
	}
	if a.spec.CheckOptions != nil {
		return a.spec.CheckOptions(options)
	}
	return nil
}

// Start implements sdk.Engine.Start.
func (a *Adapter) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	if err := CheckStart(req, a.spec.Options...); err != nil {
		return sdk.Worker{}, err
	}
	if err := a.CheckOptions(req.Options); err != nil {
		return sdk.Worker{}, err
	}
	policy := req.Health.WithDefaults()
	a.mu.Lock()
	if a.conn != nil {
		a.mu.Unlock()
		return sdk.Worker{}, fmt.Errorf("%w: %s adapter", sdk.ErrAlreadyStarted, a.spec.Engine)
	}
	tracker := &connTracker{}
	conn, err := dial(req.EngineAddr, policy, tracker.dialOption())
	if err != nil {
		a.mu.Unlock()
		return sdk.Worker{}, err
	}
	a.seen = &instances{log: a.log, engine: a.spec.Engine, addr: req.EngineAddr, clock: a.clock, tracker: tracker, read: a.spec.LifetimeID}
	a.conn, a.policy = conn, policy
	a.mu.Unlock()

	signals, worker, err := a.waitAndRead(ctx, conn, req, policy)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if a.conn == conn {
			a.conn = nil
		}
		conn.Close()
		return sdk.Worker{}, err
	}
	a.started, a.signals, a.worker = true, signals, worker
	a.pings, a.busy = startPings(ctx, req.EngineAddr, policy)
	return worker, nil
}

// waitAndRead waits within the startup deadline until every signal
// serves, then reads the worker.
func (a *Adapter) waitAndRead(ctx context.Context, conn *grpc.ClientConn, req sdk.StartRequest, policy sdk.HealthPolicy) ([]Signal, sdk.Worker, error) {
	deadline := req.StartupDeadline
	if deadline == 0 {
		deadline = sdk.DefaultStartupDeadline
	}
	signals, err := a.waitSignals(ctx, conn, req, policy, deadline)
	if err != nil {
		return nil, sdk.Worker{}, err
	}
	rctx, cancelRead := context.WithTimeout(ctx, InfoTimeout)
	defer cancelRead()
	worker, err := a.readWorker(rctx, conn, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, sdk.Worker{}, fmt.Errorf("reading %s engine information: %w", a.spec.Engine, ctx.Err())
		}
		// The engine's own status stays out of the chain: a timeout here
		// is an unavailable engine, not the startup deadline.
		return nil, sdk.Worker{}, fmt.Errorf("%w: reading %s engine information: %v", sdk.ErrUnavailable, a.spec.Engine, err)
	}
	a.seen.taken(worker.InstanceID)
	settle(ctx, conn, policy.Timeout)
	return signals, worker, nil
}

// readWorker calls Spec.ReadWorkerFor, or else Spec.ReadWorker.
func (a *Adapter) readWorker(ctx context.Context, conn *grpc.ClientConn, req sdk.StartRequest) (sdk.Worker, error) {
	if a.spec.ReadWorkerFor != nil {
		return a.spec.ReadWorkerFor(ctx, conn, req)
	}
	return a.spec.ReadWorker(ctx, conn)
}

// waitSignals gets the engine's signals and waits until every one serves,
// within deadline; a bad option value from Spec.Signals ends it at once.
func (a *Adapter) waitSignals(ctx context.Context, conn *grpc.ClientConn, req sdk.StartRequest, policy sdk.HealthPolicy, deadline time.Duration) ([]Signal, error) {
	tctx, cancelTimeout := context.WithTimeout(ctx, deadline)
	defer cancelTimeout()
	// A bad option value ends the wait at once, as its cause.
	wctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	var signals []Signal
	err := healthwatch.Wait(wctx, func(ctx context.Context) error {
		if signals == nil {
			sctx, stop := context.WithTimeout(ctx, policy.Timeout)
			s, err := a.spec.Signals(sctx, conn, req.Options)
			stop()
			if errors.Is(err, sdk.ErrInvalidArgument) {
				cancel(err)
			}
			if err != nil {
				return err
			}
			signals = s
		}
		err := checkAll(ctx, signals, policy.Timeout)
		if errors.Is(err, ErrNotServing) {
			a.seen.answeredNotServing(ctx, conn, policy.Timeout)
		}
		return err
	}, healthwatch.WaitOptions{Backoff: healthwatch.DefaultBackoff(policy.RetryMax), Clock: a.clock, OnAttempt: a.progress(req.EngineAddr, deadline)})
	if cause := context.Cause(wctx); errors.Is(cause, sdk.ErrInvalidArgument) {
		return nil, cause
	}
	if err != nil {
		return nil, startupError(ctx, err, a.spec.Engine, req.EngineAddr, deadline)
	}
	return signals, nil
}

// checkAll checks every signal once, each within timeout.
func checkAll(ctx context.Context, signals []Signal, timeout time.Duration) error {
	for _, s := range signals {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.Check(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// progress returns the startup wait's OnAttempt: it logs at the first
// failed check and then once per WaitLogInterval, and once that the engine
// address answers HTTP/1.x, which gRPC's error does not say.
func (a *Adapter) progress(addr string, deadline time.Duration) func(retry int, err error) {
	began := a.clock.Now()
	var logged time.Time // of the last progress entry; zero: none yet
	warnedHTTP1 := false
	return func(retry int, err error) {
		if !warnedHTTP1 && answersHTTP1(err) {
			warnedHTTP1 = true
			a.log.Warn(msgHTTP1, "engine", a.spec.Engine, "engine_addr", addr)
		}
		now := a.clock.Now()
		if !logged.IsZero() && now.Sub(logged) < WaitLogInterval {
			return
		}
		logged = now
		a.log.Info("waiting for the engine to serve", "engine", a.spec.Engine, "engine_addr", addr,
			"waited", now.Sub(began).Round(time.Millisecond).String(), "startup_deadline", deadline.String(),
			"attempts", retry+1, "last_error", err)
	}
}

// WatchAvailability implements sdk.Engine.WatchAvailability: Merge over
// every signal but Startup ones, and LifetimeSource. The first event comes
// once every signal has reported.
func (a *Adapter) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	a.mu.Lock()
	conn, started, policy, signals, worker, busy := a.conn, a.started, a.policy, a.signals, a.worker, a.busy
	a.mu.Unlock()
	if conn == nil || !started {
		return nil, fmt.Errorf("%w: WatchAvailability before Start", sdk.ErrNotStarted)
	}
	var read func(context.Context) (string, error)
	if a.spec.LifetimeID != nil {
		read = func(ctx context.Context) (string, error) { return a.spec.LifetimeID(ctx, conn) }
	}
	opts := healthwatch.WatchOptions{Busy: busy, Reopened: sameLifetime(worker.InstanceID, read)}
	sources := make([]Source, 0, len(signals)+1)
	for _, s := range signals {
		if s.Role != Startup {
			sources = append(sources, s.source(policy, opts))
		}
	}
	sources = append(sources, LifetimeSource(conn, policy, worker.InstanceID, read))
	return withBusy(ctx, a.spec.Engine, Merge(ctx, a.spec.Engine, sources...), busy), nil
}

// Conn returns the engine connection after a successful Start, for the
// adapter's own calls; before Start, or after Shutdown, an error wrapping
// sdk.ErrNotStarted.
func (a *Adapter) Conn() (*grpc.ClientConn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn == nil || !a.started {
		return nil, fmt.Errorf("%w: %s adapter", sdk.ErrNotStarted, a.spec.Engine)
	}
	return a.conn, nil
}

// InFlight is the adapter's set of generations in flight, for the InFlight
// field of the Generations it relays.
func (a *Adapter) InFlight() *InFlight { return &a.inflight }

// Shutdown implements sdk.Engine.Shutdown: it aborts the generations still
// in flight (InFlight), for at most AbortTimeout and half the time ctx has
// left, so that it still answers in time when the engine does not; then it
// closes the engine connection, which ends watches and calls on it. The
// engine keeps running. It is idempotent.
func (a *Adapter) Shutdown(ctx context.Context) error {
	bound := AbortTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(d)/2)
	}
	actx, cancel := context.WithTimeout(ctx, bound)
	a.inflight.AbortAll(actx)
	cancel()
	a.mu.Lock()
	conn, pings := a.conn, a.pings
	a.conn, a.started, a.pings = nil, false, nil
	a.mu.Unlock()
	if pings != nil {
		pings.Close()
	}
	if conn == nil {
		return nil
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("closing %s engine connection: %w", a.spec.Engine, err)
	}
	return nil
}
