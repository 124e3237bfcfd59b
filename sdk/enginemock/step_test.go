package enginemock

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// manualSteps is a step interval no test reaches: the test calls step
// itself, as a fake clock would tick.
const manualSteps = time.Hour

// inFlight waits until the engine has n generations in flight, so that the
// next step counts all of them.
func inFlight(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.State().InFlight != n {
		if time.Now().After(deadline) {
			t.Fatalf("in_flight = %d, want %d", e.State().InFlight, n)
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}

// none fails if a chunk is waiting on c.
func none(t *testing.T, c <-chan Chunk, what string) {
	t.Helper()
	select {
	case got := <-c:
		t.Fatalf("%s: chunk %+v, want none before the next step", what, got)
	default:
	}
}

// TestStepTiming: in step mode a generation gets one token per step, the
// first at the first step after it arrived, and nothing between steps.
func TestStepTiming(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{StepInterval: manualSteps})
	chunks, done := started(t, t.Context(), e, "r") // 10 tokens
	inFlight(t, e, 1)
	none(t, chunks, "before the first step")
	ids := seq(0, nil, 10)
	for i := range 10 {
		e.step()
		got := recv(t, chunks, 1)[0]
		if diff := cmp.Diff(ids[i:i+1], got.Tokens); diff != "" {
			t.Fatalf("step %d (-want +got):\n%s", i+1, diff)
		}
		if i < 9 {
			none(t, chunks, "between steps")
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Generate = %v, want nil", err)
	}
}

// TestStepAdvancesBatch: one step gives every generation in flight its next
// token.
func TestStepAdvancesBatch(t *testing.T) {
	t.Parallel()
	const n = 64
	e := newEngine(t, Config{StepInterval: manualSteps})
	streams := make([]<-chan Chunk, n)
	dones := make([]<-chan error, n)
	for i := range streams {
		streams[i], dones[i] = started(t, t.Context(), e, "r")
	}
	inFlight(t, e, n)
	ids := seq(0, nil, 10)
	for step := range 10 {
		e.step()
		for i, c := range streams {
			if got := recv(t, c, 1)[0].Tokens; len(got) != 1 || got[0] != ids[step] {
				t.Fatalf("stream %d after step %d: tokens %v, want [%d]", i, step+1, got, ids[step])
			}
		}
	}
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Errorf("Generate = %v, want nil", err)
		}
	}
}

// TestStepAbortLeavesBatch: an aborted or cancelled generation leaves the
// batch; the others keep getting a token per step.
func TestStepAbortLeavesBatch(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{StepInterval: manualSteps})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ca, da := started(t, t.Context(), e, "a")
	cb, db := started(t, ctx, e, "b")
	cc, dc := started(t, t.Context(), e, "c")
	inFlight(t, e, 3)
	e.step()
	for _, c := range []<-chan Chunk{ca, cb, cc} {
		recv(t, c, 1)
	}
	e.Abort("a")
	want := []Chunk{{Finish: &Finish{Reason: FinishAborted, OutputTokens: 1}}}
	if diff := cmp.Diff(want, recv(t, ca, 1)); diff != "" {
		t.Errorf("after Abort (-want +got):\n%s", diff)
	}
	if err := <-da; err != nil {
		t.Errorf("aborted Generate = %v, want nil", err)
	}
	cancel()
	if err := <-db; status.Code(err) != codes.Canceled {
		t.Errorf("cancelled Generate = %v, want CANCELED", err)
	}
	inFlight(t, e, 1)
	e.step()
	if got := recv(t, cc, 1)[0].Tokens; len(got) != 1 || got[0] != seq(0, nil, 2)[1] {
		t.Errorf("remaining stream's second token: %v", got)
	}
	e.Abort("c")
	<-dc
}

// TestStepHoldFail: POST /hold and /fail still act in step mode; a held
// generation resumes at the step after the release.
func TestStepHoldFail(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{StepInterval: manualSteps})
	must(t, e, "/hold", `{"at_token": 1}`)
	ch, dh := started(t, t.Context(), e, "held")
	inFlight(t, e, 1)
	e.step()
	recv(t, ch, 1)
	e.step()
	e.step()
	none(t, ch, "held")
	must(t, e, "/release", "")
	e.step()
	if got := recv(t, ch, 1)[0].Tokens; len(got) != 1 || got[0] != seq(0, nil, 2)[1] {
		t.Errorf("first token after the release: %v, want one, the second", got)
	}
	e.Abort("held")
	<-dh

	must(t, e, "/fail", `{"at_token": 1, "code": "RESOURCE_EXHAUSTED"}`)
	cf, df := started(t, t.Context(), e, "failed")
	inFlight(t, e, 1)
	e.step()
	recv(t, cf, 1)
	if err := <-df; status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Generate = %v, want RESOURCE_EXHAUSTED", err)
	}
}

// TestStepTicker: with a real interval the engine's one ticker drives every
// stream, and TokenDelay no longer paces them.
func TestStepTicker(t *testing.T) {
	t.Parallel()
	const interval = 5 * time.Millisecond
	e := newEngine(t, Config{StepInterval: interval, TokenDelay: time.Hour, TokensPerMessage: 2})
	begin := time.Now()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			got, err := collect(t.Context(), e, Request{MaxNewTokens: 4})
			if err == nil && len(got) != 2 {
				err = status.Errorf(codes.Internal, "%d messages, want 2", len(got))
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(begin); took < 3*interval {
		t.Errorf("4 tokens took %v, want at least %v: one token per step", took, 3*interval)
	}
}
