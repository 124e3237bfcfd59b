// Package supervisor is vigil's lifecycle: it starts the engine adapter,
// waits for the engine, keeps the worker registered exactly while the engine
// serves, and drains and exits when the engine is lost or vigil is told to
// stop.
//
// States and transitions (next is the pure transition function; enter holds
// the effects; one select loop takes every input, signals included, in
// every state):
//
//	            launched           started          SERVING           NOT_READY
//	Launching ──────────▶ Waiting ─────────▶ Started ────────▶ Serving ◀─────────▶ NotReady
//	    │                    │                  │                 │      SERVING      │
//	    │ failed / stop      │ failed / stop    │ LOST/failed/stop│ LOST/failed/stop  │ LOST/failed/stop
//	    ▼                    ▼                  ▼                 ▼                   ▼
//	    └────────────────────┴──────────────────┴───▶ Draining ◀──┴───────────────────┘
//	                                                     │ drained / stop / overdue
//	                                                     ▼
//	                                                  Stopped
//
//	(and Started ──NOT_READY──▶ NotReady)
//
//	Config.Tokenizer set: Started ──prepare──▶ Preparing, then, when it returns,
//	with the availability seen meanwhile:
//
//	Preparing ──SERVING──▶ Serving   ──NOT_READY──▶ NotReady   ──prepared (none)──▶ Started
//	    │ LOST/failed/stop ──▶ Draining;   DRAINING ──▶ EngineDraining
//
//	Started/Serving/NotReady ──DRAINING──▶ EngineDraining ──drained / overdue──▶ Stopped
//	                                            │ LOST / stop
//	                                            ▼
//	                                         Draining (the requests left get the grace period)
//
//	Config.WaitOnLoss (--on-loss=wait): the drain of a loss (lost, hung, the
//	engine's drain on purpose) ends in waiting again, not in Stopped:
//
//	Draining ──recover──▶ Launching ──launched──▶ Waiting ──▶ ...
//	EngineDraining ──recover──┘   (the adapter restarted; the wait under the startup deadline)
//
//	  - Launching: the adapter process starts and tells what it is.
//	  - Waiting: the adapter's Start waits, up to the startup deadline, for
//	    the engine to serve.
//	  - Started: the engine served; the endpoint has it, and the availability
//	    watch opens. Nothing is registered until the watch says SERVING.
//	  - Preparing: the worker decides which prompts it takes (the
//	    Tokenizer hook loads the model's tokenizer, off the loop): nothing
//	    is registered, a loss or a stop acts at once, and a SERVING or
//	    NOT_READY seen meanwhile is held and fed when it returns.
//	  - Serving: the worker is registered and admits requests.
//	  - NotReady: the engine is alive but not accepting work; the worker is
//	    withdrawn and vigil stays up.
//	  - Draining: the one unwind, from any state: the endpoint is told vigil
//	    is stopping (its liveness health turns NOT_SERVING; not for a loss
//	    that WaitOnLoss survives); a startup phase
//	    running is cancelled; a worker that may be registered is withdrawn at once,
//	    admits nothing (after the shutdown delay, for a stop) and gives
//	    requests in flight the grace period, after which those left are
//	    cut and aborted at the engine; then the adapter is shut down. It
//	    all fits the shutdown budget, the shutdown delay + the grace period
//	    + 2s, each step after the grace period bounded (see drain.go). A
//	    second stop signal, or the drain outliving its budget, abandons it.
//	  - EngineDraining: the engine drains on purpose (sdk.Draining: it
//	    stopped serving while its connection and lifetime id hold, and
//	    finishes what it has). The endpoint's liveness turns NOT_SERVING,
//	    the worker is withdrawn at once and admits nothing, and the
//	    requests in flight run on while they make progress
//	    (Endpoint.Finish): one with no chunk for the stall timeout is cut
//	    alone, those left at the drain timeout are cut; then the adapter
//	    is shut down, and Run returns a loss (exit 1). Its budget is the
//	    drain timeout + 2s (EngineDrainBudget). A real loss or a stop
//	    moves to Draining, which starts no second drain but cuts this one
//	    after the grace period, under the grace period's budget.
//	    Config.DrainTimeout 0 turns the path off: DRAINING is LOST.
//	  - Stopped: Run returns why.
//
// "recover" (see recover.go) is the end of a loss's drain under
// Config.WaitOnLoss, when no stop signal and no failure came meanwhile: the
// endpoint's liveness stayed SERVING (Stopping was not called), the adapter
// was shut down or killed, and the lifecycle starts afresh from Launching,
// the Announcer running on. A stop signal during that drain is taken as a
// first signal (the drain finishes, then Stopped), not as a second.
//
// "hung" (from Waiting on) is the adapter process not answering its pings
// (see hung.go), which unwinds as a loss does, but at once: its requests in
// flight are ended without the grace period or an abort, and the adapter
// is killed, not asked to shut down.
//
// Once started, "failed" is the announcer giving up: another live vigil
// holds the worker's registration (a duplicate worker id). The drain then
// withdraws nothing of the other's.
//
// Why it ended is the first of a stop (nil), an engine loss
// (outcome.ErrEngineLost, a hung adapter included) or a failure (outcome.ErrStartupDeadline,
// outcome.ErrConfig, also for a duplicate worker id, or another error); an
// abandoned drain adds outcome.ErrDrainCut or outcome.ErrShutdownBudget,
// and so does a step of the drain abandoned at its bound (the engine's
// abort unanswered, the adapter's Shutdown unanswered). The command
// package turns that into the exit code. A loss seen while draining for a signal is
// expected and logged at info.
//
// A Config's Observer, when set, is told of every state entered,
// availability reported, withdrawal and re-registration, for vigil run's
// metrics.
package supervisor
