package supervisor

import "testing"

func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{
		0: "unknown", StateStarting: "starting", StateServing: "serving", StateNotReady: "not-ready",
		StateDraining: "draining", StateStopped: "stopped", StateStopped + 1: "unknown",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
	for in, want := range map[Input]string{
		0: "unknown", InputServing: "serving", InputNotReady: "not-ready", InputLost: "lost",
		InputStop: "stop", InputDrained: "drained", InputDrained + 1: "unknown",
	} {
		if got := in.String(); got != want {
			t.Errorf("Input(%d).String() = %q, want %q", int(in), got, want)
		}
	}
}

// TestNext covers every state and input.
func TestNext(t *testing.T) {
	t.Parallel()
	S, R, N, D, X := StateStarting, StateServing, StateNotReady, StateDraining, StateStopped
	want := map[State]map[Input]State{
		S: {InputServing: R, InputNotReady: N, InputLost: D, InputStop: D, InputDrained: S},
		R: {InputServing: R, InputNotReady: N, InputLost: D, InputStop: D, InputDrained: R},
		N: {InputServing: R, InputNotReady: N, InputLost: D, InputStop: D, InputDrained: N},
		// Once draining, only the end of the drain moves on: a late SERVING
		// must not register a worker that is on its way out.
		D: {InputServing: D, InputNotReady: D, InputLost: D, InputStop: D, InputDrained: X},
		X: {InputServing: X, InputNotReady: X, InputLost: X, InputStop: X, InputDrained: X},
	}
	for from, row := range want {
		for in, to := range row {
			if got := next(from, in); got != to {
				t.Errorf("next(%s, %s) = %s, want %s", from, in, got, to)
			}
		}
	}
}
