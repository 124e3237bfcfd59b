package load

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	sglangmock "github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/plugins/vllm/mock"
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
