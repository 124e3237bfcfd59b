package e2e

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// TestTraceStamps: through the real adapter subprocess, a request that
// asks for trace stamps gets on every chunk the adapter's and the host's
// receive and send times in path order, after the engine sent the chunk
// (the mock stamps its tokens with the send time) and before the client
// got it; a request that does not ask gets none, and the same tokens.
func TestTraceStamps(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		_, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(time.Millisecond), Extra: []string{"--stamp-tokens"}})
		c := workerClient(t, v.Listen)
		for _, trace := range []bool{true, false} {
			req := tokenPrompt("trace", 8, 5, 6, 7)
			req.Trace = trace
			stream, err := c.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			tokens := 0
			for {
				msg, err := stream.Recv()
				at := time.Now().UnixNano()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("trace %v: %v", trace, err)
				}
				ch := msg.GetChunk()
				if ch == nil {
					continue
				}
				tokens += len(ch.GetTokenIds())
				tr := ch.GetTraceUnixNano()
				if !trace {
					if tr != nil {
						t.Errorf("untraced chunk carries stamps %v", tr)
					}
					continue
				}
				if len(tr) != 4 || len(ch.GetTokenIds()) == 0 {
					t.Fatalf("traced chunk %v: want 4 stamps (adapter received, adapter sent, host received, host sent) and tokens", ch)
				}
				for i, at := range tr {
					if at == 0 {
						t.Errorf("traced chunk stamp %d missing: %v", i, tr)
					}
				}
				// The engine sent the chunk before the adapter received it:
				// the age of its stamp then is short, not a wrap-around.
				if age := enginemock.StampAge(ch.GetTokenIds()[0], tr[0]); age > time.Second {
					t.Errorf("adapter received a chunk %s after the engine sent it, or before; want after, within 1s", age)
				}
				path := append(tr, at)
				for i := 1; i < len(path); i++ {
					if path[i] < path[i-1] {
						t.Errorf("stamps then client receive %v out of path order at %d", path, i)
					}
				}
			}
			if tokens != 8 {
				t.Errorf("trace %v: got %d tokens, want 8", trace, tokens)
			}
		}
	})
}
