package supervisor

import "testing"

func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{
		0: "unknown", StateLaunching: "launching", StateWaiting: "waiting", StateStarted: "started",
		StateServing: "serving", StateNotReady: "not-ready", StateDraining: "draining", StateStopped: "stopped",
		StateEngineDraining: "engine-draining", StatePreparing: "preparing", StatePreparing + 1: "unknown",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
	for in, want := range map[Input]string{
		0: "unknown", InputLaunched: "launched", InputStarted: "started", InputFailed: "failed",
		InputServing: "serving", InputNotReady: "not-ready", InputLost: "lost", InputStop: "stop",
		InputDrained: "drained", InputOverdue: "overdue", InputHung: "hung", InputDraining: "draining", InputRecover: "recover",
		InputPrepare: "prepare", InputPrepared: "prepared", InputPrepared + 1: "unknown",
	} {
		if got := in.String(); got != want {
			t.Errorf("Input(%d).String() = %q, want %q", int(in), got, want)
		}
	}
}

// TestNext covers every state and input.
func TestNext(t *testing.T) {
	t.Parallel()
	L, W, S, R, N, D, X, E, P := StateLaunching, StateWaiting, StateStarted, StateServing, StateNotReady, StateDraining, StateStopped, StateEngineDraining, StatePreparing
	inputs := []Input{InputLaunched, InputStarted, InputFailed, InputServing, InputNotReady, InputLost, InputStop, InputDrained, InputOverdue, InputHung, InputDraining, InputRecover, InputPrepare, InputPrepared}
	// One row a state; one column an input, in the order of inputs.
	want := map[State][]State{
		// Startup: each phase's result moves on; a failure or a stop
		// unwinds, and so does an adapter that stopped answering; the
		// engine's events come only once it has started.
		L: {W, L, D, L, L, L, D, L, L, D, L, L, L, L},
		W: {W, S, D, W, W, W, D, W, W, D, W, W, W, W},
		// An engine that drains on purpose lets its requests finish.
		S: {S, S, D, R, N, D, D, S, S, D, E, S, P, S},
		R: {R, R, D, R, N, D, D, R, R, D, E, R, R, R},
		N: {N, N, D, R, N, D, D, N, N, D, E, N, N, N},
		// Preparing (Config.Tokenizer runs): a loss or a stop acts at
		// once; the availability seen meanwhile is fed when it returns
		// (SERVING registers then), or prepared when none was.
		P: {P, P, D, R, N, D, D, P, P, D, E, P, P, S},
		// Once draining, only the end of the drain, a second signal or the
		// budget moves on: a late SERVING must not register a worker that
		// is on its way out, and the drain's steps are bounded whether the
		// adapter answers or not. Under --on-loss=wait the end of a
		// loss's drain relaunches the adapter and waits again.
		D: {D, D, D, D, D, D, X, X, X, D, D, L, D, D},
		X: {X, X, X, X, X, X, X, X, X, X, X, X, X, X},
		// The engine's drain: a late SERVING registers nothing, a
		// duplicate id changes nothing (the worker is withdrawn); a real
		// loss or a stop cuts what is left after the grace period; the
		// end of the drain or its budget stops. Pings stop as the drain
		// begins, so a late hung changes nothing either.
		E: {E, E, E, E, E, D, D, X, X, E, E, L, E, E},
	}
	if len(inputs) != int(InputPrepared) || len(want) != int(StatePreparing) {
		t.Fatalf("the table covers %d inputs and %d states, want every one", len(inputs), len(want))
	}
	for from, row := range want {
		if len(row) != len(inputs) {
			t.Errorf("row %s has %d columns, want %d", from, len(row), len(inputs))
		}
		for i, to := range row {
			if got := next(from, inputs[i]); got != to {
				t.Errorf("next(%s, %s) = %s, want %s", from, inputs[i], got, to)
			}
		}
	}
}
