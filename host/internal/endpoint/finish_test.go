package endpoint

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// drainingEngine stands in for an engine that drains on purpose: a prompt
// of token 1 streams tokens tokens, one every tick, and finishes; any other
// stalls after its first token until its context ends. started gets each
// request's engine id after its first token; Abort records the ids.
type drainingEngine struct {
	tokens  int
	tick    time.Duration
	started chan string
	mu      sync.Mutex
	aborted []string
}

func (f *drainingEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if err := send(sdk.Chunk{TokenIDs: []uint32{7}}); err != nil {
		return sdk.Result{}, err
	}
	f.started <- req.RequestID
	if req.TokenIDs[0] != 1 {
		<-ctx.Done()
		return sdk.Result{}, ctx.Err()
	}
	t := time.NewTicker(f.tick)
	defer t.Stop()
	for range f.tokens - 1 {
		select {
		case <-t.C:
		case <-ctx.Done():
			return sdk.Result{}, ctx.Err()
		}
		if err := send(sdk.Chunk{TokenIDs: []uint32{7}}); err != nil {
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 1, CompletionTokens: uint32(f.tokens)}, nil
}

func (f *drainingEngine) Abort(_ context.Context, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = append(f.aborted, ids...)
	return nil
}

// Finish lets a stream that keeps making progress run on well past the
// stall timeout until it completes, and cuts only the one that sends
// nothing for the stall timeout, with a final error naming it, and has the
// engine abort that one.
func TestFinishCutsStalledStream(t *testing.T) {
	t.Parallel()
	const stall = 200 * time.Millisecond
	e := &drainingEngine{tokens: 40, tick: 20 * time.Millisecond, started: make(chan string, 2)} // 800ms: 4 stall timeouts
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	progressing, stalled := make(chan result, 1), make(chan result, 1)
	go func() { progressing <- run(t.Context(), c, prompt(1)) }()
	first := <-e.started
	go func() { stalled <- run(t.Context(), c, prompt(2)) }()
	stalledID := <-e.started
	if stalledID == first {
		t.Fatal("the two requests share an engine id")
	}

	began := time.Now()
	if err := s.Finish(t.Context(), stall, time.Second); err != nil {
		t.Errorf("Finish() = %v, want nil", err)
	}
	if d := time.Since(began); d < 10*e.tick {
		t.Errorf("Finish returned after %s, before the progressing stream could finish", d)
	}
	p := <-progressing
	if p.err != nil || p.tokens != e.tokens || p.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("progressing stream: %d tokens, final %v, error %v; want all %d tokens, LENGTH, no error", p.tokens, p.final, p.err, e.tokens)
	}
	st := <-stalled
	if status.Code(st.err) != codes.Unavailable || st.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR ||
		!strings.Contains(st.final.GetDescription(), "stall timeout") {
		t.Errorf("stalled stream: final %v, error %v; want final ERROR naming the stall timeout, then UNAVAILABLE", st.final, st.err)
	}
	e.mu.Lock()
	aborted := e.aborted
	e.mu.Unlock()
	if len(aborted) != 1 || aborted[0] != stalledID {
		t.Errorf("engine aborted %v, want only the stalled request %s", aborted, stalledID)
	}
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "engine draining") {
		t.Errorf("a request after Finish: %v, want UNAVAILABLE (engine draining)", r.err)
	}
}

// When ctx ends (the drain timeout, or the grace period after a loss), the
// requests left are cut as Drain cuts them.
func TestFinishCutsAtContextEnd(t *testing.T) {
	t.Parallel()
	e := &drainingEngine{tokens: 1 << 20, tick: 5 * time.Millisecond, started: make(chan string, 1)}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	res := make(chan result, 1)
	go func() { res <- run(t.Context(), c, prompt(1)) }()
	id := <-e.started
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := s.Finish(ctx, time.Hour, time.Second); err != nil {
		t.Errorf("Finish() = %v, want nil", err)
	}
	if r := <-res; status.Code(r.err) != codes.Unavailable || !strings.Contains(r.final.GetDescription(), "drain ended") {
		t.Errorf("stream at the end of the drain: final %v, error %v; want cut", r.final, r.err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.aborted) != 1 || e.aborted[0] != id {
		t.Errorf("engine aborted %v, want %s", e.aborted, id)
	}
}
