package load

import (
	"context"
	"io"
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

// TestRunWindow: with a warm-up, a run counts only the tokens that arrive
// inside its measuring window, wherever their request started or ended,
// and marks the window's opening and closing for the caller's CPU reads.
func TestRunWindow(t *testing.T) {
	t.Parallel()
	tokens := make(chan int) // unbuffered: a send returns once drain took it
	req := func(ctx context.Context, id string) Outcome {
		return drain(ctx, func() (int, error) {
			n, ok := <-tokens
			if !ok {
				return 0, io.EOF
			}
			return n, nil
		})
	}
	marks := make(chan struct{}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result)
	go func() {
		done <- Run(ctx, Config{Streams: 1, Duration: time.Minute, Warmup: time.Second, MaxRequests: 1,
			RequestTimeout: time.Minute, Mark: func() { marks <- struct{}{} }}, req)
	}()
	// Each send after a token's returns once drain has counted it.
	send := func(n ...int) {
		for _, n := range n {
			tokens <- n
		}
		tokens <- 0
	}
	send(1, 1, 1) // before the window: the warm-up is a second
	<-marks
	send(2, 3) // inside it
	cancel()
	<-marks
	send(4) // after it, from the same request
	close(tokens)
	res := <-done
	if res.Tokens != 5 || res.Requests != 1 || res.Elapsed <= 0 {
		t.Errorf("tokens %d, requests %d, elapsed %s; want the window's 5 tokens of 1 request over a positive time", res.Tokens, res.Requests, res.Elapsed)
	}
}

// TestRunRamp: a ramp spreads the streams' first requests over its length.
func TestRunRamp(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	req := func(ctx context.Context, id string) Outcome {
		started <- struct{}{}
		<-release
		return Outcome{}
	}
	done := make(chan Result)
	go func() {
		done <- Run(context.Background(), Config{Streams: 2, Duration: time.Minute, Ramp: 400 * time.Millisecond,
			MaxRequests: 2, RequestTimeout: time.Minute, RecordSends: true}, req)
	}()
	<-started
	<-started
	close(release)
	res := <-done
	// Measured from the run's start: the first stream's own send may lag
	// it by a scheduling delay, so the gap between the two sends may not.
	if gap := res.Sends[1].Sub(res.Start); gap < 200*time.Millisecond {
		t.Errorf("second stream's first request %s after the run's start, want at least 200ms (half a 400ms ramp over 2 streams)", gap)
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
