package supervisor

import "testing"

func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{
		0: "unknown", StateLaunching: "launching", StateWaiting: "waiting", StateStarted: "started",
		StateServing: "serving", StateNotReady: "not-ready", StateDraining: "draining", StateStopped: "stopped",
		StateStopped + 1: "unknown",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
	for in, want := range map[Input]string{
		0: "unknown", InputLaunched: "launched", InputStarted: "started", InputFailed: "failed",
		InputServing: "serving", InputNotReady: "not-ready", InputLost: "lost", InputStop: "stop",
		InputDrained: "drained", InputOverdue: "overdue", InputOverdue + 1: "unknown",
	} {
		if got := in.String(); got != want {
			t.Errorf("Input(%d).String() = %q, want %q", int(in), got, want)
		}
	}
}

// TestNext covers every state and input.
func TestNext(t *testing.T) {
	t.Parallel()
	L, W, S, R, N, D, X := StateLaunching, StateWaiting, StateStarted, StateServing, StateNotReady, StateDraining, StateStopped
	type row = map[Input]State
	want := map[State]row{
		// Startup: each phase's result moves on; a failure or a stop
		// unwinds; the engine's events come only once it has started.
		L: {InputLaunched: W, InputStarted: L, InputFailed: D, InputServing: L, InputNotReady: L,
			InputLost: L, InputStop: D, InputDrained: L, InputOverdue: L},
		W: {InputLaunched: W, InputStarted: S, InputFailed: D, InputServing: W, InputNotReady: W,
			InputLost: W, InputStop: D, InputDrained: W, InputOverdue: W},
		S: {InputLaunched: S, InputStarted: S, InputFailed: S, InputServing: R, InputNotReady: N,
			InputLost: D, InputStop: D, InputDrained: S, InputOverdue: S},
		R: {InputLaunched: R, InputStarted: R, InputFailed: R, InputServing: R, InputNotReady: N,
			InputLost: D, InputStop: D, InputDrained: R, InputOverdue: R},
		N: {InputLaunched: N, InputStarted: N, InputFailed: N, InputServing: R, InputNotReady: N,
			InputLost: D, InputStop: D, InputDrained: N, InputOverdue: N},
		// Once draining, only the end of the drain, a second signal or the
		// budget moves on: a late SERVING must not register a worker that
		// is on its way out.
		D: {InputLaunched: D, InputStarted: D, InputFailed: D, InputServing: D, InputNotReady: D,
			InputLost: D, InputStop: X, InputDrained: X, InputOverdue: X},
		X: {InputLaunched: X, InputStarted: X, InputFailed: X, InputServing: X, InputNotReady: X,
			InputLost: X, InputStop: X, InputDrained: X, InputOverdue: X},
	}
	for s := StateLaunching; s <= StateStopped; s++ {
		for in := InputLaunched; in <= InputOverdue; in++ {
			to, ok := want[s][in]
			if !ok {
				t.Errorf("no expectation for next(%s, %s)", s, in)
				continue
			}
			if got := next(s, in); got != to {
				t.Errorf("next(%s, %s) = %s, want %s", s, in, got, to)
			}
		}
	}
}
