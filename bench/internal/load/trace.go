package load

import (
	"context"
	"fmt"
	"time"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"google.golang.org/grpc"
)

// Path is one chunk's times along the path from the engine to the
// reference client, wall clock (time.Now), Unix nanoseconds: every process
// runs on one machine, so their clocks agree (a monotonic clock is not
// comparable across processes).
type Path struct {
	// EngineSent comes from the mock engine's token stamp (run with
	// --stamp-tokens), the adapter's and host's from the chunk's
	// trace_unix_nano, Client from this client after its receive.
	EngineSent, AdapterReceived, AdapterSent, HostReceived, HostSent, Client int64
}

// Hop names one segment of a Path.
type Hop struct {
	Name string
	// From and To pick the segment's ends.
	From, To func(Path) int64
}

// Latency is the time the chunk took over hop h.
func (p Path) Latency(h Hop) time.Duration { return time.Duration(h.To(p) - h.From(p)) }

// Hops are the three hops whose added latency B5 reports: each runs from
// the previous hop's send to this one's, so that a hop's receive, its
// work and its queueing all count where they happen.
var Hops = []Hop{
	{"engine→adapter", func(p Path) int64 { return p.EngineSent }, func(p Path) int64 { return p.AdapterSent }},
	{"adapter→host", func(p Path) int64 { return p.AdapterSent }, func(p Path) int64 { return p.HostSent }},
	{"host→client", func(p Path) int64 { return p.HostSent }, func(p Path) int64 { return p.Client }},
}

// Segments split the path at every stamp: the wire between processes and
// the time inside each, for telling where a hop's latency goes.
var Segments = []Hop{
	{"engine→adapter receive", func(p Path) int64 { return p.EngineSent }, func(p Path) int64 { return p.AdapterReceived }},
	{"inside adapter", func(p Path) int64 { return p.AdapterReceived }, func(p Path) int64 { return p.AdapterSent }},
	{"adapter→host receive", func(p Path) int64 { return p.AdapterSent }, func(p Path) int64 { return p.HostReceived }},
	{"inside host", func(p Path) int64 { return p.HostReceived }, func(p Path) int64 { return p.HostSent }},
	{"host→client receive", func(p Path) int64 { return p.HostSent }, func(p Path) int64 { return p.Client }},
	EngineToClient,
}

// EngineToClient is the whole path, and the direct path's one hop.
var EngineToClient = Hop{"engine→client", func(p Path) int64 { return p.EngineSent }, func(p Path) int64 { return p.Client }}

// TracedWorker is Worker asking vigil for trace stamps (trace in
// vigil.worker.v1.GenerateRequest), against a mock engine run with
// --stamp-tokens: each chunk's Path goes to Outcome.Paths. A chunk without
// all four stamps fails the request.
func TracedWorker(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	c := workerv1.NewWorkerClient(cc)
	return func(ctx context.Context, id string) Outcome {
		stream, err := c.Generate(ctx, &workerv1.GenerateRequest{
			RequestId: id,
			Prompt:    &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: prompt}},
			Stopping:  &workerv1.Stopping{MaxTokens: maxTokens},
			Trace:     true,
		})
		if err != nil {
			return Outcome{Err: err}
		}
		var paths []Path
		out := drain(ctx, func() (int, error) {
			msg, err := stream.Recv()
			at := time.Now().UnixNano()
			if f := msg.GetFinal(); f != nil && f.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_ERROR {
				return 0, fmt.Errorf("final: %s", f.GetDescription())
			}
			ch := msg.GetChunk()
			if ch == nil {
				return 0, err
			}
			p, perr := pathOf(ch, at)
			if perr != nil {
				return 0, perr
			}
			paths = append(paths, p)
			return len(ch.GetTokenIds()), err
		})
		out.Paths = paths
		return out
	}
}

// pathOf reads a chunk's Path; the engine's send time is its first
// token's stamp, taken back to a full time against the adapter's receive.
func pathOf(ch *workerv1.Chunk, client int64) (Path, error) {
	tr, ids := ch.GetTraceUnixNano(), ch.GetTokenIds()
	if len(tr) != 4 || len(ids) == 0 {
		return Path{}, fmt.Errorf("chunk with %d trace stamps and %d tokens, want 4 stamps and a token", len(tr), len(ids))
	}
	for i, t := range tr {
		if t == 0 {
			return Path{}, fmt.Errorf("chunk trace stamp %d missing (0): %v", i, tr)
		}
	}
	return Path{
		EngineSent:      tr[0] - int64(enginemock.StampAge(ids[0], tr[0])),
		AdapterReceived: tr[0], AdapterSent: tr[1], HostReceived: tr[2], HostSent: tr[3],
		Client: client,
	}, nil
}

// StampedVLLM is DirectVLLM against a mock run with --stamp-tokens, each
// message's engine→client time going to Outcome.Paths (EngineSent and
// Client only): one gRPC hop without vigil, beside the traced hops.
func StampedVLLM(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	return directVLLM(cc, maxTokens, true)
}

// StampedSGLang is StampedVLLM for SGLang.
func StampedSGLang(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	return directSGLang(cc, maxTokens, true)
}

// stamped adds the path of a message whose first token is ids[0], read
// now, to paths.
func stamped(paths []Path, ids []uint32) []Path {
	if len(ids) == 0 {
		return paths
	}
	now := time.Now().UnixNano()
	return append(paths, Path{EngineSent: now - int64(enginemock.StampAge(ids[0], now)), Client: now})
}
