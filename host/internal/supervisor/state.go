package supervisor

// State is a lifecycle state; see the package doc for the diagram.
type State int

// The lifecycle states.
const (
	StateLaunching State = iota + 1
	StateWaiting
	StateStarted
	StateServing
	StateNotReady
	StateDraining
	StateStopped
	// StateEngineDraining: the engine drains on purpose (sdk.Draining).
	StateEngineDraining
	// StatePreparing: the engine served and the worker decides which
	// prompts it takes (Config.Tokenizer runs); nothing is registered.
	StatePreparing
)

func (s State) String() string {
	switch s {
	case StateLaunching:
		return "launching"
	case StateWaiting:
		return "waiting"
	case StateStarted:
		return "started"
	case StateServing:
		return "serving"
	case StateNotReady:
		return "not-ready"
	case StateDraining:
		return "draining"
	case StateStopped:
		return "stopped"
	case StateEngineDraining:
		return "engine-draining"
	case StatePreparing:
		return "preparing"
	default:
		return "unknown"
	}
}

// Input is what moves the lifecycle.
type Input int

// The lifecycle inputs.
const (
	// InputLaunched: the adapter is up and has told what it is.
	InputLaunched Input = iota + 1
	// InputStarted: the adapter's Start returned: the engine serves.
	InputStarted
	// InputFailed: launching the adapter or waiting for the engine
	// failed (the startup deadline passed, say), or, once started, the
	// worker cannot be registered for good (another vigil holds its
	// registration).
	InputFailed
	// InputServing: the engine serves.
	InputServing
	// InputNotReady: the engine is alive but not accepting work.
	InputNotReady
	// InputLost: the engine failed, shut down, or cannot be reached, or
	// the adapter died.
	InputLost
	// InputStop: a stop signal (SIGTERM, SIGINT or SIGHUP).
	InputStop
	// InputDrained: the drain finished.
	InputDrained
	// InputOverdue: the drain outlived its shutdown budget.
	InputOverdue
	// InputHung: the adapter process stopped answering its pings (stopped,
	// swapped out, its server wedged): a loss that the adapter can no
	// longer report, nor help drain.
	InputHung
	// InputDraining: the engine drains on purpose: it stopped serving
	// while its connection and lifetime id hold, and finishes what it has.
	InputDraining
	// InputRecover: the drain after an engine loss (a hung adapter and
	// an engine's drain on purpose included) finished under
	// Config.WaitOnLoss (--on-loss=wait), no stop nor failure having
	// come: the lifecycle restarts the adapter and waits for the engine
	// again.
	InputRecover
	// InputPrepare: the engine started and Config.Tokenizer is set: the
	// worker decides which prompts it takes before it registers.
	InputPrepare
	// InputPrepared: Config.Tokenizer returned with no availability seen
	// meanwhile (a SERVING or a NOT_READY seen meanwhile is fed instead).
	InputPrepared
)

func (i Input) String() string {
	switch i {
	case InputLaunched:
		return "launched"
	case InputStarted:
		return "started"
	case InputFailed:
		return "failed"
	case InputServing:
		return "serving"
	case InputNotReady:
		return "not-ready"
	case InputLost:
		return "lost"
	case InputStop:
		return "stop"
	case InputDrained:
		return "drained"
	case InputOverdue:
		return "overdue"
	case InputHung:
		return "hung"
	case InputDraining:
		return "draining"
	case InputRecover:
		return "recover"
	case InputPrepare:
		return "prepare"
	case InputPrepared:
		return "prepared"
	default:
		return "unknown"
	}
}

// next is the transition function. It has no effects.
func next(s State, in Input) State {
	switch s {
	case StateLaunching, StateWaiting:
		switch {
		case s == StateLaunching && in == InputLaunched:
			return StateWaiting
		case s == StateWaiting && in == InputStarted:
			return StateStarted
		case in == InputFailed, in == InputStop, in == InputHung:
			return StateDraining
		}
	case StateStarted, StateServing, StateNotReady, StatePreparing:
		switch {
		case s == StateStarted && in == InputPrepare:
			return StatePreparing
		case s == StatePreparing && in == InputPrepared:
			return StateStarted
		}
		switch in {
		case InputServing:
			return StateServing
		case InputNotReady:
			return StateNotReady
		case InputDraining:
			return StateEngineDraining
		case InputLost, InputStop, InputFailed, InputHung:
			return StateDraining
		}
	case StateEngineDraining:
		// Requests in flight finish while they make progress; a real loss
		// or a stop gives them the grace period, as any drain does.
		switch in {
		case InputLost, InputStop:
			return StateDraining
		case InputDrained, InputOverdue:
			return StateStopped
		case InputRecover:
			return StateLaunching
		}
	case StateDraining:
		switch in {
		case InputDrained, InputStop, InputOverdue:
			return StateStopped
		case InputRecover:
			// A fresh adapter holds nothing of the lost engine's.
			return StateLaunching
		}
	}
	return s
}
