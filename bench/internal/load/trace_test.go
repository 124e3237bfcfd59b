package load

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	sglangmock "github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/plugins/vllm/mock"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// TestStamped: reading a mock that stamps its tokens gives one path per
// message, sent by the engine during the request and received after.
func TestStamped(t *testing.T) {
	t.Parallel()
	for name, eng := range map[string]struct {
		engine  *enginemock.Engine
		stamped func(grpc.ClientConnInterface, uint32) Request
	}{
		"vllm":   {mock.New(mock.Config{}).Engine, StampedVLLM},
		"sglang": {sglangmock.New(sglangmock.Config{}).Engine, StampedSGLang},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eng.engine.StampTokens()
			before := time.Now().UnixNano()
			out := eng.stamped(serve(t, eng.engine), 8)(t.Context(), "req-1")
			if out.Err != nil || out.Tokens != 8 || len(out.Paths) != 8 {
				t.Fatalf("got %d tokens and %d paths, err %v; want 8 and 8", out.Tokens, len(out.Paths), out.Err)
			}
			for i, p := range out.Paths {
				if d := p.Latency(EngineToClient); p.EngineSent < before || d < 0 {
					t.Errorf("message %d sent at %d (request at %d), %s before its receive; want within the request", i, p.EngineSent, before, d)
				}
			}
		})
	}
}

// TestPathOf: a traced chunk's stamps make its path, the engine's send
// time taken back from the token stamp; a chunk missing one is an error.
func TestPathOf(t *testing.T) {
	t.Parallel()
	sent := time.Unix(0, 5<<31+100)
	tr := []int64{sent.UnixNano() + 10, sent.UnixNano() + 20, sent.UnixNano() + 30, sent.UnixNano() + 40}
	p, err := pathOf(&workerv1.Chunk{TokenIds: []uint32{enginemock.StampToken(sent)}, TraceUnixNano: tr}, sent.UnixNano()+50)
	want := Path{EngineSent: sent.UnixNano(), AdapterReceived: tr[0], AdapterSent: tr[1], HostReceived: tr[2], HostSent: tr[3], Client: sent.UnixNano() + 50}
	if err != nil || p != want {
		t.Errorf("pathOf = %+v, %v; want %+v", p, err, want)
	}
	for _, bad := range [][]int64{nil, {1, 2, 3}, {1, 0, 3, 4}} {
		if _, err := pathOf(&workerv1.Chunk{TokenIds: []uint32{1}, TraceUnixNano: bad}, 5); err == nil {
			t.Errorf("pathOf with stamps %v = nil error, want one", bad)
		}
	}
}
