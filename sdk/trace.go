package sdk

import (
	"context"
	"time"
)

// Positions in Chunk.Trace: the hops of a chunk's path from the engine to
// the worker's client, in order.
const (
	// TraceAdapterReceived: the adapter received the chunk from the engine.
	TraceAdapterReceived = iota
	// TraceAdapterSent: the adapter handed it to the plugin stream.
	TraceAdapterSent
	// TraceHostReceived: the host received it from the adapter.
	TraceHostReceived
	// TraceHostSent: the host handed it to the client's stream.
	TraceHostSent
	// TraceHops counts the positions.
	TraceHops
)

// tracingKey marks the context of a request that asked for trace stamps.
type tracingKey struct{}

// WithTracing returns ctx marked as the context of a request that asked
// for trace stamps (GenerateRequest.Trace); the sdk marks the context an
// adapter's Generate runs with.
func WithTracing(ctx context.Context) context.Context {
	return context.WithValue(ctx, tracingKey{}, true)
}

// Tracing reports whether ctx is the context of a request that asked for
// trace stamps, so that code which sees only the context (such as
// adapterkit.Relay) stamps TraceAdapterReceived.
func Tracing(ctx context.Context) bool {
	on, _ := ctx.Value(tracingKey{}).(bool)
	return on
}

// TraceNow is the wall-clock time now in Unix nanoseconds when on, and 0
// without reading the clock when off. Wall clock, not monotonic: the stamps
// are compared across processes of one machine.
func TraceNow(on bool) int64 {
	if !on {
		return 0
	}
	return time.Now().UnixNano()
}

// TraceStamp returns trace with at (Unix nanoseconds) at position hop (one
// of the Trace* positions), when on; positions before hop that nobody
// stamped are 0, and positions after it are dropped. Off, it returns nil
// and costs a branch. A new slice has room for every hop, so that later
// stamps of the chunk do not allocate.
func TraceStamp(on bool, trace []int64, hop int, at int64) []int64 {
	if !on {
		return nil
	}
	if cap(trace) <= hop {
		t := make([]int64, len(trace), TraceHops)
		copy(t, trace)
		trace = t
	}
	n := min(len(trace), hop)
	trace = trace[:hop+1]
	clear(trace[n:hop])
	trace[hop] = at
	return trace
}

// TraceStampNow is TraceStamp with the time now.
func TraceStampNow(on bool, trace []int64, hop int) []int64 {
	if !on {
		return nil
	}
	return TraceStamp(true, trace, hop, time.Now().UnixNano())
}
