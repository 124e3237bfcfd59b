package load

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	sglangmock "github.com/vigilhq/vigil/plugins/sglang/mock"
	trtllmmock "github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// startEngine serves an in-process vLLM mock engine on a loopback port
// and returns requests of 8 tokens to it.
func startEngine(tb testing.TB) Request {
	tb.Helper()
	return DirectVLLM(serve(tb, mock.New(mock.Config{}).Engine), 8)
}

// serve serves eng on a loopback port until the test ends and returns a
// connection to it.
func serve(tb testing.TB, eng *enginemock.Engine) *grpc.ClientConn {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go eng.Serve(lis)
	tb.Cleanup(eng.Stop)
	cc, err := Dial(lis.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// TestDirect: each engine's direct request streams the tokens asked for
// and names the request by its id, as vigil's adapter does.
func TestDirect(t *testing.T) {
	t.Parallel()
	for name, eng := range map[string]struct {
		engine *enginemock.Engine
		direct func(grpc.ClientConnInterface, uint32) Request
	}{
		"vllm":   {mock.New(mock.Config{}).Engine, DirectVLLM},
		"sglang": {sglangmock.New(sglangmock.Config{}).Engine, DirectSGLang},
		"trtllm": {trtllmmock.New(trtllmmock.Config{}).Engine, DirectTRTLLM},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := eng.direct(serve(t, eng.engine), 8)(context.Background(), "req-1")
			if out.Err != nil || out.Tokens != 8 || out.First.IsZero() {
				t.Errorf("got %d tokens, first at %v, err %v; want 8 tokens", out.Tokens, out.First, out.Err)
			}
			if n := eng.engine.State().Requests["req-1"]; n != 1 {
				t.Errorf("the engine counted %d requests with id req-1, want 1", n)
			}
		})
	}
}

// TestRunBoundedByCount: a run stops at MaxRequests long before its
// duration, counts every token and keeps each send time by sequence.
func TestRunBoundedByCount(t *testing.T) {
	t.Parallel()
	req := startEngine(t)
	res := Run(context.Background(), Config{Streams: 4, Duration: time.Minute, MaxRequests: 50,
		RequestTimeout: 10 * time.Second, IDPrefix: "t-", RecordSends: true}, req)
	if res.Requests != 50 || res.Errors != 0 || res.Tokens != 50*8 {
		t.Fatalf("requests %d, errors %d (%v), tokens %d; want 50, 0, 400", res.Requests, res.Errors, res.FirstErr, res.Tokens)
	}
	if len(res.TTFT) != 50 || len(res.Sends) != 50 {
		t.Errorf("got %d TTFT samples and %d send times, want 50 each", len(res.TTFT), len(res.Sends))
	}
	for i, at := range res.Sends {
		if at.IsZero() {
			t.Errorf("send time of request %d missing", i)
		}
	}
	if res.Elapsed > 30*time.Second {
		t.Errorf("run took %s: the count bound did not stop it", res.Elapsed)
	}
}

// TestRunBoundedByTime: without a reachable count bound a run ends after
// its duration, and a cancelled context ends it at once.
func TestRunBoundedByTime(t *testing.T) {
	t.Parallel()
	req := startEngine(t)
	res := Run(context.Background(), Config{Streams: 2, Duration: 200 * time.Millisecond, MaxRequests: 1 << 40,
		RequestTimeout: 10 * time.Second}, req)
	if res.Requests == 0 || res.Errors != 0 || res.Elapsed > 5*time.Second {
		t.Errorf("requests %d, errors %d, elapsed %s; want some, none and about 200ms", res.Requests, res.Errors, res.Elapsed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := Run(ctx, Config{Streams: 2, Duration: time.Minute, MaxRequests: 1 << 40, RequestTimeout: time.Second}, req); res.Requests != 0 {
		t.Errorf("cancelled run sent %d requests, want 0", res.Requests)
	}
}

// BenchmarkDirectStream is the floor under B5's direct path: one stream of
// 8-token requests against an in-process mock with no token delay.
func BenchmarkDirectStream(b *testing.B) {
	req := startEngine(b)
	ctx := context.Background()
	var tokens int
	for b.Loop() {
		out := req(ctx, "b")
		if out.Err != nil {
			b.Fatal(out.Err)
		}
		tokens += out.Tokens
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}
