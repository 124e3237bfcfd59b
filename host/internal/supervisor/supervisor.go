package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// Endpoint is the worker's request endpoint as the lifecycle drives it.
type Endpoint interface {
	// Attach gives the endpoint the engine to forward requests to, once
	// the engine serves.
	Attach(g sdk.Generator, w sdk.Worker)
	// Admit admits requests (true) or refuses them with reason (false),
	// and reports the same in the endpoint's gRPC health.
	Admit(admit bool, reason string)
	// Drain refuses new requests and returns when none is in flight, or,
	// when ctx ends first, once it has ended those still in flight and had
	// the engine abort them, or cutTimeout after ctx ended, whichever is
	// first. Its error says what did not finish (wrapping
	// context.DeadlineExceeded when cutTimeout ran out) or failed.
	Drain(ctx context.Context, cutTimeout time.Duration) error
	// Stopping reports that vigil is stopping for good (the drain began),
	// for the endpoint's liveness health.
	Stopping()
	// Abandon stops admitting and ends every request in flight at once
	// with reason, asking the engine to abort nothing: the adapter has
	// stopped answering and could not relay it.
	Abandon(reason string)
	// Finish refuses new requests and returns when none is in flight, as
	// Drain does, but for an engine that drains on purpose: a request
	// that has sent no chunk for stall (counted from the later of its
	// last chunk and the call) is cut alone and aborted at the engine;
	// when ctx ends, those left are cut as Drain cuts them.
	Finish(ctx context.Context, stall, cutTimeout time.Duration) error
}

// Observer is told of the lifecycle's events, for metrics. Its methods are
// called from the lifecycle's loop, in order, and must not block.
type Observer interface {
	// Entered: the lifecycle entered st.
	Entered(st State)
	// Availability: the engine's availability as the adapter last
	// reported it.
	Availability(a sdk.Availability)
	// EngineStarted: the adapter's Start returned, the engine serving,
	// wait after the wait for it began.
	EngineStarted(wait time.Duration)
	// Withdrawn: a worker that was registered (or being registered) and
	// admitting requests was withdrawn, for cause: CauseNotReady,
	// CauseLost, CauseStop or CauseFailed.
	Withdrawn(cause string)
	// Reregistered: a worker withdrawn for cause (CauseNotReady) is
	// registered again.
	Reregistered(cause string)
	// Busy: the adapter reports the serving engine busy (its liveness
	// checks time out while its connection answers PINGs), or no longer;
	// told on change only.
	Busy(busy bool)
	// Recovered: under Config.WaitOnLoss, the lifecycle survived an engine
	// loss for cause (CauseLost, CauseHung or CauseDraining): drained, it
	// restarts the adapter and waits for the engine again.
	Recovered(cause string)
}

// The causes of a withdrawal or a re-registration, as Observer is told
// them (metric label values). The host cannot tell an engine asleep from
// one paused: both are CauseNotReady.
const (
	// CauseNotReady: the engine was alive but not accepting work (asleep,
	// paused).
	CauseNotReady = "not_ready"
	// CauseLost: the engine was lost.
	CauseLost = "lost"
	// CauseStop: a stop signal.
	CauseStop = "stop"
	// CauseFailed: the registration was given up (a duplicate worker id, or
	// metadata no registry takes).
	CauseFailed = "failed"
	// CauseDraining: the engine drains on purpose.
	CauseDraining = "draining"
	// CauseHung: the adapter stopped answering (Observer.Recovered only;
	// a withdrawal for it is CauseLost).
	CauseHung = "hung"
)

// nopObserver is the Observer of a Config without one.
type nopObserver struct{}

func (nopObserver) Entered(State)                 {}
func (nopObserver) Availability(sdk.Availability) {}
func (nopObserver) EngineStarted(time.Duration)   {}
func (nopObserver) Withdrawn(string)              {}
func (nopObserver) Reregistered(string)           {}
func (nopObserver) Busy(bool)                     {}
func (nopObserver) Recovered(string)              {}

// Adapter is a started engine adapter.
type Adapter struct {
	// Engine is the adapter's API.
	Engine sdk.Engine
	// Version is the negotiated plugin protocol version.
	Version int
	// Kill stops the adapter process, within stepTimeout however the
	// adapter behaves; it must be idempotent.
	Kill func()
	// Ping asks the adapter process whether it answers, under ctx; nil:
	// it is not watched. From its launch until the drain, the lifecycle
	// pings it under the health policy (see pingAdapter).
	Ping func(ctx context.Context) error
	// KillNow kills the adapter process at once (SIGKILL), for one that
	// stopped answering, and returns once it has exited; nil: Kill.
	KillNow func()
}

// FromPlugin adapts a launched go-plugin subprocess: Kill lets it exit
// gracefully for stepTimeout, then kills it; KillNow kills it at once.
func FromPlugin(p *pluginhost.Plugin) Adapter {
	return Adapter{Engine: p.Engine, Version: p.Version, Ping: p.Ping, Kill: func() {
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		p.KillContext(ctx)
	}, KillNow: func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.KillContext(ctx)
	}}
}

// Config is what Run needs. All fields are required but ServedModelName,
// ShutdownDelay, ExplainRejected, CheckAdapter and Observer.
type Config struct {
	// Launch starts the adapter; it returns early with an error when ctx
	// ends.
	Launch func(ctx context.Context) (Adapter, error)
	// Start is passed to the adapter's Start.
	Start sdk.StartRequest
	// Registration has the service, worker id, engine name and advertised
	// address set; Run fills in what the engine reports, and the name the
	// adapter reports when Engine is empty.
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
	// DrainTimeout bounds the drain of an engine that drains on purpose
	// (sdk.Draining, --drain-timeout): requests in flight run on this long
	// at most. 0: no such drain: Draining is taken for a loss, as hosts
	// before it took it.
	DrainTimeout time.Duration
	// StallTimeout cuts a request of an engine that drains on purpose
	// once it has sent no chunk this long (--stall-timeout). 0:
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// WaitOnLoss (--on-loss=wait): an engine loss (a hung adapter and the
	// end of an engine's drain on purpose included) does not end Run: the
	// worker is withdrawn and drained as for a loss, the endpoint's
	// liveness stays SERVING, and the adapter is restarted and the engine
	// waited for again under the startup deadline, registered as a fresh
	// start would. False: Run returns the loss (the seed's contract).
	WaitOnLoss bool
	// ShutdownDelay keeps admitting requests this long after a stop
	// signal's withdrawal, while the engine serves, for load balancers that
	// learn of the withdrawal late (as Nomad's shutdown_delay). 0: none.
	ShutdownDelay time.Duration
	Logger        hclog.Logger

	// ExplainRejected, when set, rewrites the error of a Start that
	// rejected its configuration for the log: vigil run names the flag
	// behind the field at fault. Nil: the adapter's error as it is.
	ExplainRejected func(error) error
	// CheckAdapter, when set, is given what the adapter reports once it
	// has started; its error (wrapping outcome.ErrConfig when no restart
	// will help) ends the startup. vigil run checks the name against
	// --engine.
	CheckAdapter func(sdk.AdapterInfo) error
	// Observer, when set, is told of the lifecycle's events (vigil run
	// --metrics-listen). Nil: none.
	Observer Observer
	// Tokenizer, when set, is called once the engine first serves, with
	// what it reported (its model path, for one), on a goroutine of its own,
	// while the lifecycle is Preparing: a stop or a loss meanwhile is acted
	// on at once, while the worker registers and the endpoint admits
	// requests only after it returns. It
	// gives the endpoint the model's tokenizer, if it has one, and reports
	// whether it did (the worker then takes text prompts whatever its engine
	// takes) and whether a chat template came with it (the worker takes chat
	// messages). Nil: neither.
	Tokenizer func(w sdk.Worker) (loaded, chat bool)
	// Capabilities, when set, gives the registration's Caps (discovery
	// metadata caps) once the endpoint has the engine and, with a
	// Tokenizer hook, once the hook returned: what the worker takes with
	// that engine and tokenizer. Nil: not stated.
	Capabilities func() discovery.Capabilities
}

// Run runs the lifecycle until it stops and returns why: nil after a stop
// signal (drained, or during startup); else an error that wraps one of
// outcome's sentinels, or another failure a restart may cure (the adapter
// would not start). signals delivers the stop signals (SIGTERM, SIGINT,
// SIGHUP); the caller subscribes before Run so that no signal is lost
// during start-up.
func Run(ctx context.Context, cfg Config, signals <-chan os.Signal) error {
	return newSupervisor(cfg).run(ctx, signals)
}

func newSupervisor(cfg Config) *supervisor {
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &supervisor{cfg: cfg, log: cfg.Logger, state: StateLaunching, lost: make(chan struct{})}
}

// supervisor is one run of the lifecycle. The select loop in run owns
// every field; a drain goroutine reads those set before it starts.
type supervisor struct {
	cfg Config
	log hclog.Logger
	ctx context.Context // run's; ends when run returns

	plugin  Adapter // zero until launched
	info    sdk.AdapterInfo
	phase   *phase // the startup phase running, if any
	worker  sdk.Worker
	reg     discovery.Registration
	started bool             // StateStarted was entered: something may be registered
	events  <-chan sdk.Event // the availability watch; nil when none
	// stopWatch ends the availability watch's relay, at a recovery.
	stopWatch context.CancelFunc
	// announcing: the Announcer runs (once a Run: it is not run twice).
	announcing bool
	// stopAsked: a stop signal came since the lifecycle last (re)started:
	// a loss's drain then ends Run rather than waiting again.
	stopAsked bool
	refused   <-chan struct{} // the announcer's Done once it runs; nil once taken
	// tokenized delivers the Tokenizer hook's decision (StatePreparing),
	// which runs off the loop (loading a tokenizer takes seconds) so that
	// a stop or a loss is acted on meanwhile; nil when none is pending.
	// held is the last SERVING or NOT_READY seen while preparing, fed
	// when it ends: the worker registers only once it knows which prompts
	// it takes.
	tokenized <-chan tokenizerDecision
	hookDone  chan struct{} // closed when the last hook started returns; nil before the first
	held      *sdk.Event
	// hung delivers why the adapter is taken for hung (its pings
	// unanswered); nil when it is not pinged. stopPing ends the pings.
	hung     <-chan string
	stopPing context.CancelFunc
	busy     bool // as the Observer was last told

	state       State
	cause       Input // InputLost, InputStop, InputFailed, InputHung or InputDraining, whichever came first
	outcome     error // what Run returns
	drained     chan struct{}
	cancelDrain context.CancelFunc
	unfinished  error            // the drain's steps abandoned at their bound; set before drained closes
	overdue     <-chan time.Time // fires when the drain outlives its budget
	// shorten is closed when a loss or a stop cuts the engine's drain
	// (StateEngineDraining) to the grace period; nil before that drain.
	shorten chan struct{}
	// shortened: shorten is closed.
	shortened bool
	budget    time.Duration // 0: overdueAfter's own; tests shorten it
	lost      chan struct{} // closed on the first loss
}

func (s *supervisor) run(ctx context.Context, signals <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	s.ctx = ctx
	defer func() {
		cancel() // the announcer, the watch, a startup phase left behind
		if s.plugin.Kill != nil {
			s.plugin.Kill()
		}
	}()
	s.cfg.Observer.Entered(StateLaunching)
	s.enter(StateLaunching)
	for s.state != StateStopped {
		select {
		case sig := <-signals:
			s.signal(sig)
		case <-s.phaseDone():
			s.endPhase()
		case ev, ok := <-s.events:
			s.watched(ev, ok)
		case d := <-s.tokenized:
			s.decided(d)
		case <-s.refused:
			s.refused = nil
			s.duplicate()
		case <-s.drained:
			s.drainEnded()
		case <-s.overdue:
			s.step(InputOverdue, "")
		case reason := <-s.hung:
			s.hung = nil
			s.step(InputHung, reason)
		}
	}
	return s.outcome
}

// watched feeds one event of the availability watch; !ok: it closed.
func (s *supervisor) watched(ev sdk.Event, ok bool) {
	s.busyChanged(ev, ok)
	switch {
	case !ok:
		s.events = nil
		if s.state != StateDraining {
			s.step(InputLost, "adapter closed the availability stream")
		}
	case (ev.Availability == sdk.Serving || ev.Availability == sdk.NotReady) && s.state == StatePreparing:
		// Fed when preparing ends: the worker registers only once it
		// knows which prompts it takes.
		s.cfg.Observer.Availability(ev.Availability)
		s.held = &ev
	case ev.Availability == sdk.Serving:
		s.cfg.Observer.Availability(ev.Availability)
		s.step(InputServing, ev.Reason)
	case ev.Availability == sdk.NotReady:
		s.cfg.Observer.Availability(ev.Availability)
		s.held = nil
		s.step(InputNotReady, ev.Reason)
	case ev.Availability == sdk.Draining && s.cfg.DrainTimeout > 0:
		s.cfg.Observer.Availability(ev.Availability)
		s.held = nil
		s.step(InputDraining, ev.Reason)
	case ev.Availability == sdk.Draining:
		s.cfg.Observer.Availability(ev.Availability)
		s.events = nil
		s.step(InputLost, ev.Reason+" (--drain-timeout 0: a drain is a loss)")
	default:
		s.cfg.Observer.Availability(sdk.Lost)
		s.events = nil
		s.step(InputLost, ev.Reason)
	}
}

// busyChanged logs and tells the Observer when the engine turns busy or
// stops being busy: a busy engine is Serving, so the lifecycle does not
// change.
func (s *supervisor) busyChanged(ev sdk.Event, ok bool) {
	busy := ok && ev.Busy && ev.Availability == sdk.Serving
	if busy == s.busy {
		return
	}
	s.busy = busy
	switch {
	case busy:
		s.log.Warn("engine busy: its health checks time out while its connection answers; the worker stays registered", "reason", ev.Reason)
	case ok && ev.Availability == sdk.Serving:
		s.log.Info("engine no longer busy", "reason", ev.Reason)
	} // else the lifecycle logs what ended it
	s.cfg.Observer.Busy(busy)
}

// duplicate ends the lifecycle when the announcer has given up: another
// live vigil holds the worker's registration, so two were given one worker
// id (the other's registration is left alone), or a metadata value the
// worker is routed by is too long for the registry. No restart will help.
func (s *supervisor) duplicate() {
	err := s.cfg.Announcer.Err()
	if s.state == StateDraining || s.state == StateEngineDraining {
		// Draining already: what the drain withdraws is the Announcer's
		// business, which leaves the other's registration alone.
		s.log.Warn("another vigil holds the worker's registration", "error", err)
		if s.survives() { // no waiting again: no restart will help
			s.outcome = fmt.Errorf("%w: registration given up: %w", outcome.ErrConfig, err)
			s.cfg.Endpoint.Stopping()
		}
		return
	}
	if meta := (*discovery.MetaError)(nil); errors.As(err, &meta) {
		s.log.Error("the registry cannot take the worker's metadata; no retry will help", "key", meta.Key, "error", err)
		s.outcome = fmt.Errorf("%w: registration refused: %w", outcome.ErrConfig, err)
		s.step(InputFailed, "registration refused: metadata "+meta.Key+" too long")
		return
	}
	s.log.Error("duplicate worker id: another vigil holds the worker's registration; give each vigil its own --worker-id",
		"worker_id", s.reg.WorkerID, "error", err)
	s.outcome = fmt.Errorf("%w: duplicate worker id: %w", outcome.ErrConfig, err)
	s.step(InputFailed, "duplicate worker id")
}

// step feeds one input to the lifecycle.
func (s *supervisor) step(in Input, reason string) {
	s.note(in, reason)
	to := next(s.state, in)
	if to == s.state {
		return
	}
	s.log.Info("lifecycle", "from", s.state.String(), "to", to.String(), "input", in.String(), "reason", reason)
	s.counted(s.state, to, in)
	s.state = to
	s.cfg.Observer.Entered(to)
	s.enter(to)
}

// counted tells the Observer of a withdrawal or a re-registration that the
// transition from to to by in makes.
func (s *supervisor) counted(from, to State, in Input) {
	switch {
	case from == StateServing && to == StateNotReady:
		s.cfg.Observer.Withdrawn(CauseNotReady)
	case from == StateServing:
		cause := CauseStop
		switch in {
		case InputLost, InputHung:
			cause = CauseLost
		case InputFailed:
			cause = CauseFailed
		case InputDraining:
			cause = CauseDraining
		}
		s.cfg.Observer.Withdrawn(cause)
	case from == StateNotReady && to == StateServing:
		s.cfg.Observer.Reregistered(CauseNotReady)
	}
}

// note logs what an input means for the outcome, and records it: whichever
// of a stop, a loss or a startup failure comes first decides, but for a
// cut or overdue drain.
func (s *supervisor) note(in Input, reason string) {
	switch in {
	case InputRecover:
		s.recover()
	case InputStop:
		s.stopAsked = true
		if s.state == StateDraining {
			// The first signal drains; any signal during a drain, the one
			// after a loss included, cuts it.
			what := "second signal"
			switch s.cause {
			case InputLost, InputHung:
				what = "signal during the drain after the engine was lost"
			case InputDraining:
				what = "signal during the engine's drain, after its loss or a first signal"
			}
			s.log.Warn(what+": exiting without finishing the drain", "signal", reason)
			s.outcome = errors.Join(s.outcome, outcome.ErrDrainCut)
		} else {
			s.log.Info("signal received; draining", "signal", reason, "grace_period", s.cfg.GracePeriod)
		}
	case InputLost:
		s.noteLost(reason)
	case InputOverdue:
		s.log.Error("the drain outlived its shutdown budget; exiting without finishing it", "budget", s.budgetNow())
		s.outcome = errors.Join(s.outcome, outcome.ErrShutdownBudget)
	case InputHung:
		s.noteHung(reason)
	case InputDrained:
		if s.unfinished != nil {
			s.log.Error("the drain abandoned steps that did not finish within the shutdown budget", "budget", s.budgetNow(), "error", s.unfinished)
			s.outcome = errors.Join(s.outcome, fmt.Errorf("%w: %w", outcome.ErrShutdownBudget, s.unfinished))
		}
	case InputDraining:
		s.noteDraining(reason)
	}
	if (in == InputLost || in == InputStop || in == InputFailed || in == InputHung || in == InputDraining) && s.cause == 0 {
		s.cause = in
	}
}

// noteLost logs what a loss means, and records it: the outcome when it
// comes first.
func (s *supervisor) noteLost(reason string) {
	select {
	case <-s.lost:
	default:
		close(s.lost)
	}
	switch {
	case s.cause == 0 && s.cfg.WaitOnLoss:
		s.log.Error("engine lost; --on-loss=wait: withdrawing and draining, then waiting for the engine again",
			"reason", reason, "grace_period", s.cfg.GracePeriod, "startup_deadline", s.cfg.Start.StartupDeadline)
	case s.cause == 0:
		s.log.Error("engine lost", "reason", reason)
		s.outcome = fmt.Errorf("%w: %s", outcome.ErrEngineLost, reason)
	case s.cause == InputDraining && s.state == StateEngineDraining:
		s.log.Info("the draining engine is gone; the requests still in flight get the grace period", "reason", reason, "grace_period", s.cfg.GracePeriod)
	case s.cause == InputDraining:
		s.log.Info("the draining engine is gone", "reason", reason)
	default:
		after := "a stop"
		switch s.cause {
		case InputFailed:
			after = "a failure" // a duplicate worker id
		case InputHung:
			after = "the adapter stopped answering"
		}
		s.log.Info("engine stopped serving while draining, as expected after "+after, "reason", reason)
	}
}

// enter holds the effects of entering a state.
func (s *supervisor) enter(st State) {
	switch st {
	case StateLaunching:
		if e := s.cfg.Registration.Engine; e != "" {
			s.log.Info("starting engine adapter", "engine", e)
		} else {
			s.log.Info("starting engine adapter")
		}
		s.startPhase(func(ctx context.Context, p *phase) { p.adapter, p.info, p.err = s.launch(ctx) })
	case StateWaiting:
		s.log.Info("waiting for engine", "engine_addr", s.cfg.Start.EngineAddr, "startup_deadline", s.cfg.Start.StartupDeadline)
		s.hung = s.pingAdapter()
		engine := s.plugin.Engine // read here: a recovery replaces it
		s.startPhase(func(ctx context.Context, p *phase) { p.worker, p.err = s.start(ctx, engine) })
	case StateStarted:
		if s.started {
			return // back from Preparing: serve ran
		}
		s.serve()
		if s.tokenized != nil {
			s.step(InputPrepare, "deciding which prompts the worker takes")
		}
	case StateServing:
		s.cfg.Announcer.Announce(s.reg)
		s.cfg.Endpoint.Admit(true, "")
	case StateNotReady:
		s.cfg.Endpoint.Admit(false, "worker not ready: the engine is asleep or paused")
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), notReadyWithdrawTime)
			defer cancel()
			if err := s.cfg.Announcer.Withdraw(ctx); err != nil {
				s.log.Error("withdrawing the not-ready worker failed", "error", err)
			}
		}()
	case StateDraining:
		if s.cfg.Endpoint != nil && !s.survives() {
			s.cfg.Endpoint.Stopping()
		}
		if s.drained != nil {
			s.shortenDrain() // the engine's drain runs: cut it after the grace period
			return
		}
		s.startDrain()
	case StateEngineDraining:
		if !s.survives() {
			s.cfg.Endpoint.Stopping()
		}
		s.startEngineDrain()
	case StateStopped:
		s.cancelDrain() // a second signal or the budget: the drain is abandoned
	}
}

// serve holds the effects of the engine's first serving: the endpoint gets
// the engine, the registration what the engine reported, and the announcer
// and the availability watch start; the watch's first SERVING registers.
func (s *supervisor) serve() {
	s.started = true
	w := s.worker
	// The override takes the engine's name's place everywhere from here:
	// the endpoint's model check, the registration and the log.
	servingArgs := []any{"model", w.ServedModelName}
	if name := s.cfg.ServedModelName; name != "" {
		servingArgs = []any{"model", name, "engine_served_model_name", w.ServedModelName}
		w.ServedModelName = name
	}
	if !s.info.Capabilities.Embed {
		w.Accepts = withoutEmbed(w.Accepts) // the host calls Embed only on an adapter that claims it
	}
	if g, ok := s.plugin.Engine.(sdk.Generator); ok && s.info.Capabilities.Generate {
		s.cfg.Endpoint.Attach(g, w)
	}
	s.reg = s.cfg.Registration
	if s.reg.Engine == "" {
		s.reg.Engine = s.info.Name
	}
	s.reg.Model, s.reg.ModelID, s.reg.InstanceID = w.ServedModelName, w.ModelID, w.InstanceID
	s.reg.TokensOnly, s.reg.Chat = !w.SupportsTextInput, false
	s.reg.Caps = s.capabilities()
	s.startTokenizer(w)
	s.reg.MaxModelLen = w.MaxModelLen
	s.log.Info("engine serving", append(servingArgs, "model_id", w.ModelID,
		"instance_id", w.InstanceID, "engine_version", w.EngineVersion)...)
	if w.ServedModelName == "" {
		// Requests naming a model would all get NOT_FOUND.
		s.log.Warn("the engine reports no model name; give --served-model-name to name the worker's model")
	}

	if !s.announcing { // after a recovery it runs still, and Announce re-registers
		s.announcing = true
		go s.cfg.Announcer.Run(s.ctx)
		s.refused = s.cfg.Announcer.Done()
	}
	s.events = s.watch()
}

// withoutEmbed is an adapter's Worker.Accepts without the embed item; a
// list of embed alone becomes "none", a stated empty set.
func withoutEmbed(accepts string) string {
	if accepts == "" {
		return ""
	}
	var kept []string
	for _, it := range strings.Split(accepts, ",") {
		if it != sdk.CapEmbed {
			kept = append(kept, it)
		}
	}
	if len(kept) == 0 {
		return "none"
	}
	return strings.Join(kept, ",")
}

// capabilities is Config.Capabilities', the zero set without it.
func (s *supervisor) capabilities() discovery.Capabilities {
	if s.cfg.Capabilities == nil {
		return discovery.Capabilities{}
	}
	return s.cfg.Capabilities()
}

// startTokenizer runs the Tokenizer hook for w off the loop. A hook of an
// engine lost before it returned (--on-loss=wait) may still be loading:
// this one starts after it, so the endpoint ends with the tokenizer of the
// engine now serving, not of the one lost.
func (s *supervisor) startTokenizer(w sdk.Worker) {
	if s.cfg.Tokenizer == nil {
		return
	}
	tokenized := make(chan tokenizerDecision, 1) // the hook never waits on a stopped loop
	s.tokenized = tokenized
	prev, done := s.hookDone, make(chan struct{})
	s.hookDone = done
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		loaded, chat := s.cfg.Tokenizer(w)
		tokenized <- tokenizerDecision{loaded, chat}
	}()
}

// tokenizerDecision is what the Tokenizer hook reported.
type tokenizerDecision struct{ loaded, chat bool }

// decided takes the Tokenizer hook's decision into the registration, and
// ends Preparing with the availability that waited for it, if any.
func (s *supervisor) decided(d tokenizerDecision) {
	s.tokenized = nil
	// vigil tokenizes text for every engine once it has the model's
	// tokenizer.
	s.reg.TokensOnly, s.reg.Chat = s.reg.TokensOnly && !d.loaded, d.chat
	s.reg.Caps = s.capabilities()
	ev := s.held
	s.held = nil
	switch {
	case s.state != StatePreparing: // a loss or a stop came first
	case ev == nil:
		s.step(InputPrepared, "")
	case ev.Availability == sdk.Serving:
		s.step(InputServing, ev.Reason)
	default:
		s.step(InputNotReady, ev.Reason)
	}
}

// notReadyWithdrawTime bounds the withdrawal of a worker whose engine is
// not ready: vigil stays up, so a backend that does not answer has time to
// come back before the next registration.
const notReadyWithdrawTime = 5 * time.Second

// watch opens the availability watch and relays it, off the loop: an
// adapter that never answers WatchAvailability must not hold the loop, so
// that a stop signal still drains. A failure to open it is a loss, through
// the loop like any other; the watch's close is relayed as a close.
func (s *supervisor) watch() <-chan sdk.Event {
	out := make(chan sdk.Event)
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopWatch = cancel
	engine := s.plugin.Engine // read here: a recovery replaces it
	go func() {
		defer close(out)
		events, err := engine.WatchAvailability(ctx)
		if err != nil {
			events = closedWith(sdk.Event{Availability: sdk.Lost, Reason: "watching engine availability failed: " + err.Error()})
		}
		for {
			var ev sdk.Event
			var ok bool
			select {
			case ev, ok = <-events:
			case <-ctx.Done():
				return
			}
			if !ok {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// closedWith is a closed channel holding ev.
func closedWith(ev sdk.Event) <-chan sdk.Event {
	c := make(chan sdk.Event, 1)
	c <- ev
	close(c)
	return c
}
