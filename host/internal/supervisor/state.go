package supervisor

// State is a lifecycle state; see the package doc for the diagram.
type State int

// The lifecycle states.
const (
	StateStarting State = iota + 1
	StateServing
	StateNotReady
	StateDraining
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateStarting:
		return "starting"
	case StateServing:
		return "serving"
	case StateNotReady:
		return "not-ready"
	case StateDraining:
		return "draining"
	case StateStopped:
		return "stopped"
	default:
		return "unknown"
	}
}

// Input is what moves the lifecycle.
type Input int

// The lifecycle inputs.
const (
	// InputServing: the engine serves.
	InputServing Input = iota + 1
	// InputNotReady: the engine is alive but not accepting work.
	InputNotReady
	// InputLost: the engine failed, shut down, or cannot be reached, or
	// the adapter died.
	InputLost
	// InputStop: SIGTERM or SIGINT.
	InputStop
	// InputDrained: the drain finished.
	InputDrained
)

func (i Input) String() string {
	switch i {
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
	default:
		return "unknown"
	}
}

// next is the transition function. It has no effects.
func next(s State, in Input) State {
	switch s {
	case StateStarting, StateServing, StateNotReady:
		switch in {
		case InputServing:
			return StateServing
		case InputNotReady:
			return StateNotReady
		case InputLost, InputStop:
			return StateDraining
		}
	case StateDraining:
		if in == InputDrained {
			return StateStopped
		}
	}
	return s
}
