package load

import (
	"context"
	"fmt"
	"time"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
)

// Path is one chunk's times at the two ends of the path from the engine
// to the reference client, wall clock (time.Now), Unix nanoseconds: every
// process runs on one machine, so their clocks agree (a monotonic clock is
// not comparable across processes). Only the ends are measured, so vigil's
// processes carry no instrumentation: what vigil adds is its path's
// latency less the direct path's.
type Path struct {
	// EngineSent comes from the mock engine's token stamp (run with
	// EnvStampTokens), Client from this client after its receive.
	EngineSent, Client int64
}

// Hop names one segment of a Path.
type Hop struct {
	Name string
	// From and To pick the segment's ends.
	From, To func(Path) int64
}

// Latency is the time the chunk took over hop h.
func (p Path) Latency(h Hop) time.Duration { return time.Duration(h.To(p) - h.From(p)) }

// EngineToClient is the whole path: through vigil, engine→adapter→host→
// client; on the direct path, its one hop.
var EngineToClient = Hop{"engine→client", func(p Path) int64 { return p.EngineSent }, func(p Path) int64 { return p.Client }}

// EnvStampTokens=1 in a mock engine's environment makes it send each
// output token as its message's send time, Unix nanoseconds mod 2^31 (the
// engines' wire has no field for a send time): the mocks' shared command,
// sdk/enginemock, reads it, for this benchmark alone.
const EnvStampTokens = "VIGIL_BENCH_STAMP_TOKENS"

// stampMask is the stamp's width: 31 bits, as every engine's token id
// type holds (SGLang's are int32).
const stampMask = 1<<31 - 1

// stampAge is how long before now (Unix nanoseconds, wall clock) the token
// stamp was sent: exact for ages below 2^31 ns (about 2.1 s), which is
// what latency along one machine's request path is.
func stampAge(stamp uint32, now int64) time.Duration {
	return time.Duration((now - int64(stamp)) & stampMask)
}

// StampedWorker is Worker against a mock engine run with EnvStampTokens:
// each chunk's Path goes to Outcome.Paths, its engine send time that of its
// first token (a chunk merged on the way holds its oldest token first).
func StampedWorker(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	c := workerv1.NewWorkerClient(cc)
	return func(ctx context.Context, id string) Outcome {
		stream, err := c.Generate(ctx, &workerv1.GenerateRequest{
			RequestId: id,
			Prompt:    &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: prompt}},
			Stopping:  &workerv1.Stopping{MaxTokens: maxTokens},
		})
		if err != nil {
			return Outcome{Err: err}
		}
		var paths []Path
		out := drain(ctx, func() (int, error) {
			msg, err := stream.Recv()
			if f := msg.GetFinal(); f != nil && f.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_ERROR {
				return 0, fmt.Errorf("final: %s", f.GetDescription())
			}
			ids := msg.GetChunk().GetTokenIds()
			paths = stamped(paths, ids)
			return len(ids), err
		})
		out.Paths = paths
		return out
	}
}

// StampedVLLM is DirectVLLM against a mock run with EnvStampTokens, each
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
	return append(paths, Path{EngineSent: now - int64(stampAge(ids[0], now)), Client: now})
}
