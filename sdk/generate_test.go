package sdk

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// stubGenerator is a stubEngine that forwards requests through generate.
type stubGenerator struct {
	stubEngine
	generate func(context.Context, GenerateRequest, func(Chunk) error) (Result, error)
}

var _ Generator = (*stubGenerator)(nil)

func (s *stubGenerator) Generate(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
	return s.generate(ctx, req, send)
}

func (s *stubGenerator) Abort(context.Context, []string) error { return nil }

// TestPluginGenerateSendAfterReturn: the adapter side refuses a send made
// after Generate returned, so the stream the host reads still ends with
// the final message.
func TestPluginGenerateSendAfterReturn(t *testing.T) {
	t.Parallel()
	for _, p := range pluginPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sends := make(chan func(Chunk) error, 1)
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(_ context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				if err := send(Chunk{TokenIDs: []uint32{7}}); err != nil {
					return Result{}, err
				}
				sends <- send
				return Result{FinishReason: FinishLength, CompletionTokens: 1}, nil
			}})
			var got []Chunk
			res, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(c Chunk) error {
				got = append(got, c)
				return nil
			})
			if err != nil || res.FinishReason != FinishLength || len(got) != 1 {
				t.Fatalf("Generate() = %+v, %v with %d chunks; want length, nil and 1 chunk", res, err, len(got))
			}
			if err := (<-sends)(Chunk{TokenIDs: []uint32{8}}); !errors.Is(err, errSendAfterReturn) {
				t.Errorf("send after Generate returned = %v, want %v", err, errSendAfterReturn)
			}
		})
	}
}

// afterFinal is an adapter, not built with this SDK, that sends then after
// the final message of every generation, or fails the stream when then is
// nil.
type afterFinal struct {
	pluginv1.UnimplementedEngineServer
	then *pluginv1.GenerateResponse
}

func (a afterFinal) Generate(_ *pluginv1.GenerateRequest, stream pluginv1.Engine_GenerateServer) error {
	final := &pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Final{Final: &pluginv1.Final{FinishReason: pluginv1.FinishReason_FINISH_REASON_STOP}}}
	if err := stream.Send(final); err != nil {
		return err
	}
	if a.then == nil {
		return status.Error(codes.Internal, "late failure")
	}
	return stream.Send(a.then)
}

// TestGenerateAfterFinal: the host refuses a generation whose stream goes
// on after the final message.
func TestGenerateAfterFinal(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		then *pluginv1.GenerateResponse
		want string
	}{
		"chunk": {&pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Chunk{Chunk: &pluginv1.Chunk{TokenIds: []uint32{1}}}}, "a message"},
		"final": {&pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Final{Final: &pluginv1.Final{}}}, "a message"},
		"error": {nil, "an error (adapter: late failure)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := &engineClient{client: pluginv1.NewEngineClient(serveRaw(t, afterFinal{then: tt.then}))}
			_, err := c.Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(Chunk) error { return nil })
			if want := "adapter sent " + tt.want + " after the final message of request r"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Generate() error = %v, want one saying %q", err, want)
			}
		})
	}
}

// serveRaw serves srv on loopback for the test and returns a client
// connection to it.
func serveRaw(t *testing.T, srv pluginv1.EngineServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pluginv1.RegisterEngineServer(s, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		<-served
	})
	return conn
}

// TestCtxErr: once the host's ctx has ended, Start and Generate return its
// error whatever status the adapter's end of the call came back with, as
// when the deadline reached the adapter first.
func TestCtxErr(t *testing.T) {
	t.Parallel()
	c := &engineClient{}
	ctx, cancel := context.WithDeadline(t.Context(), time.Now())
	defer cancel()
	<-ctx.Done()
	err := c.ctxErr(ctx, status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "RST_STREAM") {
		t.Errorf("ctxErr() past the deadline = %v, want an error wrapping context.DeadlineExceeded with the status's message", err)
	}
	if err := c.ctxErr(passed{t.Context()}, status.Error(codes.Canceled, "")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctxErr() past the deadline, its timer not fired = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if err := c.ctxErr(t.Context(), status.Error(codes.Unavailable, "engine gone")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ctxErr() with ctx live = %v, want the status's class, ErrUnavailable", err)
	}
}

// passed is a context whose deadline has passed and whose timer has not
// yet fired, as a loaded machine may leave one: Err is still nil.
type passed struct{ context.Context }

func (passed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
