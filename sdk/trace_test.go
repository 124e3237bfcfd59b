package sdk

import (
	"context"
	"slices"
	"testing"
)

// TestTraceStamp: stamps land at their hop's position, with 0 for hops
// nobody stamped; off, nothing is stamped and nothing allocated. Not
// parallel: AllocsPerRun counts the whole process's allocations.
func TestTraceStamp(t *testing.T) {
	tr := TraceStamp(true, nil, TraceAdapterReceived, 10)
	tr = TraceStamp(true, tr, TraceAdapterSent, 20)
	if want := []int64{10, 20}; !slices.Equal(tr, want) {
		t.Errorf("adapter stamps = %v, want %v", tr, want)
	}
	// An adapter that stamped nothing: the host's stamp keeps its place.
	if got, want := TraceStamp(true, nil, TraceHostReceived, 30), []int64{0, 0, 30}; !slices.Equal(got, want) {
		t.Errorf("host stamp alone = %v, want %v", got, want)
	}
	// A peer that sent more than its hops: the later positions are ours.
	if got, want := TraceStamp(true, []int64{1, 2, 3, 4}, TraceHostReceived, 30), []int64{1, 2, 30}; !slices.Equal(got, want) {
		t.Errorf("stamp over extra positions = %v, want %v", got, want)
	}
	// Room left in a reused slice may hold old stamps: skipped hops are 0.
	if got, want := TraceStamp(true, []int64{9, 9, 9, 9}[:1], TraceHostReceived, 30), []int64{9, 0, 30}; !slices.Equal(got, want) {
		t.Errorf("stamp into a reused slice = %v, want %v", got, want)
	}
	if got := TraceStamp(false, []int64{1}, TraceAdapterSent, 20); got != nil {
		t.Errorf("TraceStamp off = %v, want nil", got)
	}
	if got := TraceStampNow(false, nil, TraceHostSent); got != nil || TraceNow(false) != 0 {
		t.Errorf("TraceStampNow off = %v, TraceNow off = %d; want nil and 0", got, TraceNow(false))
	}
	var sink []int64
	if n := testing.AllocsPerRun(100, func() { sink = TraceStampNow(false, sink, TraceHostSent) }); n != 0 {
		t.Errorf("tracing off allocates %v times per stamp, want 0", n)
	}
	// The first stamp makes room for all, so the later ones do not allocate.
	first := TraceStamp(true, nil, TraceAdapterReceived, 1)
	if n := testing.AllocsPerRun(100, func() {
		tr := TraceStamp(true, first[:1], TraceAdapterSent, 2)
		tr = TraceStamp(true, tr, TraceHostReceived, 3)
		sink = TraceStamp(true, tr, TraceHostSent, 4)
	}); n != 0 {
		t.Errorf("later stamps allocate %v times, want 0", n)
	}
}

// TestPluginGenerateTrace: a request that asks for trace stamps gets the
// adapter's and the host's in path order on every chunk, across the
// plugin boundary, and the adapter's context says so; one that does not
// gets none.
func TestPluginGenerateTrace(t *testing.T) {
	t.Parallel()
	for _, p := range pluginPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var sawTracing []bool
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(ctx context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				on := Tracing(ctx)
				sawTracing = append(sawTracing, on)
				for i := range 3 {
					// As adapterkit.Relay does on receiving from the engine.
					c := Chunk{TokenIDs: []uint32{uint32(i)}, Trace: TraceStampNow(on, nil, TraceAdapterReceived)}
					if err := send(c); err != nil {
						return Result{}, err
					}
				}
				return Result{FinishReason: FinishLength, CompletionTokens: 3}, nil
			}})
			for _, trace := range []bool{true, false} {
				var got []Chunk
				tokens := 0
				if _, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}, Trace: trace}, func(c Chunk) error {
					got = append(got, c)
					tokens += len(c.TokenIDs)
					return nil
				}); err != nil || tokens != 3 {
					// Chunks may arrive merged: a merged one keeps its first part's stamps.
					t.Fatalf("Generate(trace %v) = %v with %d tokens; want nil and 3", trace, err, tokens)
				}
				for i, c := range got {
					if !trace {
						if c.Trace != nil {
							t.Errorf("untraced chunk %d carries stamps %v", i, c.Trace)
						}
						continue
					}
					if len(c.Trace) != TraceHostReceived+1 {
						t.Fatalf("chunk %d stamps = %v, want adapter received, adapter sent, host received", i, c.Trace)
					}
					for h := 1; h < len(c.Trace); h++ {
						if c.Trace[h-1] == 0 || c.Trace[h] < c.Trace[h-1] {
							t.Errorf("chunk %d stamps %v out of path order at %d", i, c.Trace, h)
						}
					}
				}
			}
			if !slices.Equal(sawTracing, []bool{true, false}) {
				t.Errorf("adapter's Tracing(ctx) = %v for a traced then an untraced request, want [true false]", sawTracing)
			}
		})
	}
}
