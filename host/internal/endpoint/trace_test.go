package endpoint

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// traceEngine sends one chunk whose stamps, when the request asks for
// them, are the adapter's and the host's receive (1, 2, 3), as the plugin
// client hands them on; it records whether the request asked.
type traceEngine struct {
	fakeEngine
	asked chan bool
}

func (f *traceEngine) Generate(_ context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	f.asked <- req.Trace
	var tr []int64
	if req.Trace {
		tr = []int64{1, 2, 3}
	}
	if err := send(sdk.Chunk{TokenIDs: []uint32{1}, Trace: tr}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 1, CompletionTokens: 1}, nil
}

// TestTraceStamps: the worker passes a request's trace flag to the engine
// and, when asked, sends each chunk with the stamps so far and its own
// send time last; unasked, the chunks carry none.
func TestTraceStamps(t *testing.T) {
	t.Parallel()
	e := &traceEngine{asked: make(chan bool, 2)}
	s, c := serve(t, e, worker, 10)
	s.Admit(true, "")
	for _, trace := range []bool{true, false} {
		req := prompt(1)
		req.Trace = trace
		before := time.Now().UnixNano()
		stream, err := c.Generate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := msg.GetChunk().GetTraceUnixNano()
		if asked := <-e.asked; asked != trace {
			t.Errorf("engine request Trace = %v, want %v", asked, trace)
		}
		switch {
		case !trace && got != nil:
			t.Errorf("untraced chunk carries stamps %v", got)
		case trace && (len(got) != sdk.TraceHops || !slices.Equal(got[:3], []int64{1, 2, 3}) || got[sdk.TraceHostSent] < before):
			t.Errorf("traced chunk stamps = %v, want [1 2 3 host sent after %d]", got, before)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
	}
}
