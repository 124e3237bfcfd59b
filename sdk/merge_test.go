package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// waitFor bounds a wait on an event in these tests: a failure, not a pace.
const waitFor = 10 * time.Second

// within runs f, failing t if f has not returned within waitFor.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("%s did not return within %s", what, waitFor)
	}
}

// mergeOutput is an engine's output for the merging tests: token ids and
// text, with multi-byte characters (2, 3 and 4 bytes) in many chunks.
func mergeOutput(n int) []Chunk {
	texts := []string{"a", "é", "日本", "😀", " b", "ß", "€"}
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{TokenIDs: []uint32{uint32(i), uint32(i + 100_000)}, Text: texts[i%len(texts)]}
	}
	return out
}

// joined is chunks' concatenation.
func joined(chunks []Chunk) Chunk {
	var ids []uint32
	var text strings.Builder
	for _, c := range chunks {
		ids = append(ids, c.TokenIDs...)
		text.WriteString(c.Text)
	}
	return Chunk{TokenIDs: ids, Text: text.String()}
}

// fakeServerStream is the adapter side's plugin stream to the host, with
// send standing in for the next hop.
type fakeServerStream struct {
	grpc.ServerStream
	ctx  context.Context
	send func(*pluginv1.GenerateResponse) error
}

func (s *fakeServerStream) Context() context.Context                { return s.ctx }
func (s *fakeServerStream) Send(m *pluginv1.GenerateResponse) error { return s.send(m) }
func (s *fakeServerStream) SetHeader(metadata.MD) error             { return nil }
func (s *fakeServerStream) SendHeader(metadata.MD) error            { return nil }
func (s *fakeServerStream) SetTrailer(metadata.MD)                  {}
func (s *fakeServerStream) SendMsg(any) error                       { return errors.New("unused") }
func (s *fakeServerStream) RecvMsg(any) error                       { return errors.New("unused") }

// TestAdapterMergesForSlowHost: while the adapter side's send to the host
// is busy, the engine's further chunks wait and go out as one message,
// whose token ids and text are exactly the engine's, in order.
func TestAdapterMergesForSlowHost(t *testing.T) {
	t.Parallel()
	out := mergeOutput(200)
	sending, produced := make(chan struct{}), make(chan struct{})
	srv := &engineServer{impl: &stubGenerator{generate: func(_ context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
		for i, c := range out {
			if err := send(c); err != nil {
				return Result{}, err
			}
			if i == 0 {
				<-sending // the rest while the first is being sent
			}
		}
		close(produced)
		return Result{FinishReason: FinishLength, CompletionTokens: uint32(len(out))}, nil
	}}}
	var got []Chunk
	var final *pluginv1.Final
	stream := &fakeServerStream{ctx: t.Context(), send: func(m *pluginv1.GenerateResponse) error {
		if f := m.GetFinal(); f != nil {
			final = f
			return nil
		}
		// The message is marshalled before Send returns, so copy it.
		ch := m.GetChunk()
		got = append(got, Chunk{TokenIDs: slices.Clone(ch.GetTokenIds()), Text: ch.GetText()})
		if len(got) == 1 {
			// A slow host: busy until the engine has produced the rest.
			close(sending)
			select {
			case <-produced:
			case <-time.After(waitFor):
				t.Error("the engine's chunks waited for the send in progress")
			}
		}
		return nil
	}}
	if err := srv.Generate(&pluginv1.GenerateRequest{RequestId: "r"}, stream); err != nil {
		t.Fatalf("Generate() = %v", err)
	}
	if final == nil || final.GetFinishReason() != pluginv1.FinishReason_FINISH_REASON_LENGTH {
		t.Fatalf("final message = %v, want one with finish reason length after the chunks", final)
	}
	if want, have := joined(out), joined(got); !slices.Equal(have.TokenIDs, want.TokenIDs) || have.Text != want.Text {
		t.Errorf("sent output = %v %q, want the engine's %v %q", have.TokenIDs, have.Text, want.TokenIDs, want.Text)
	}
	// The first chunk went out alone; the 199 that waited, as one.
	if len(got) != 2 {
		t.Errorf("sent %d messages for %d chunks, want 2: the first, then the rest merged", len(got), len(out))
	}
}

// fakeClientStream is the host side's plugin stream from the adapter: it
// answers Recv from msgs, then io.EOF, calling recvd with how many
// messages Recv was called for.
type fakeClientStream struct {
	grpc.ClientStream
	ctx   context.Context
	msgs  []*pluginv1.GenerateResponse
	next  int
	recvd func(n int)
}

func (s *fakeClientStream) Recv() (*pluginv1.GenerateResponse, error) {
	s.next++
	if s.recvd != nil {
		s.recvd(s.next)
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	if s.next > len(s.msgs) {
		return nil, io.EOF
	}
	return s.msgs[s.next-1], nil
}

// fakeEngineClient opens stream for Generate.
type fakeEngineClient struct {
	pluginv1.EngineClient
	stream func(ctx context.Context) pluginv1.Engine_GenerateClient
}

func (c fakeEngineClient) Generate(ctx context.Context, _ *pluginv1.GenerateRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pluginv1.GenerateResponse], error) {
	return c.stream(ctx), nil
}

// TestHostMergesForSlowClient: while the host's send to its client is
// busy, the chunks the adapter sends meanwhile reach the next send as one,
// exactly the adapter's token ids and text, in order.
func TestHostMergesForSlowClient(t *testing.T) {
	t.Parallel()
	out := mergeOutput(200)
	msgs := make([]*pluginv1.GenerateResponse, 0, len(out)+1)
	for _, c := range out {
		msgs = append(msgs, &pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Chunk{Chunk: &pluginv1.Chunk{TokenIds: c.TokenIDs, Text: c.Text}}})
	}
	msgs = append(msgs, &pluginv1.GenerateResponse{Kind: &pluginv1.GenerateResponse_Final{Final: &pluginv1.Final{FinishReason: pluginv1.FinishReason_FINISH_REASON_STOP}}})
	// The adapter's second message comes while the first is being sent,
	// and Recv is called for the message after the final one once every
	// chunk is waiting.
	sending, allRead := make(chan struct{}), make(chan struct{})
	c := &engineClient{client: fakeEngineClient{stream: func(ctx context.Context) pluginv1.Engine_GenerateClient {
		return &fakeClientStream{ctx: ctx, msgs: msgs, recvd: func(n int) {
			switch n {
			case 2:
				<-sending
			case len(msgs) + 1:
				close(allRead)
			}
		}}
	}}}
	var got []Chunk
	res, err := c.Generate(t.Context(), GenerateRequest{RequestID: "r"}, func(ch Chunk) error {
		got = append(got, ch)
		if len(got) == 1 {
			close(sending)
			select {
			case <-allRead:
			case <-time.After(waitFor):
				t.Error("the adapter's chunks waited for the send in progress")
			}
		}
		return nil
	})
	if err != nil || res.FinishReason != FinishStop {
		t.Fatalf("Generate() = %+v, %v; want stop, nil", res, err)
	}
	if want, have := joined(out), joined(got); !slices.Equal(have.TokenIDs, want.TokenIDs) || have.Text != want.Text {
		t.Errorf("sent output = %v %q, want the adapter's %v %q", have.TokenIDs, have.Text, want.TokenIDs, want.Text)
	}
	if len(got) != 2 {
		t.Errorf("send called %d times for %d chunks, want 2: the first, then the rest merged", len(got), len(out))
	}
}

// TestMergedOutputExactOverPlugin: through the plugin's gRPC on both
// sides, with a host whose send is slow at first, the host receives
// exactly the engine's token ids and text, then the result.
func TestMergedOutputExactOverPlugin(t *testing.T) {
	t.Parallel()
	for _, p := range pluginPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			out := mergeOutput(500)
			produced := make(chan struct{})
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(_ context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				for _, c := range out {
					if err := send(c); err != nil {
						return Result{}, err
					}
				}
				close(produced)
				return Result{FinishReason: FinishStop, CompletionTokens: uint32(len(out))}, nil
			}})
			var got []Chunk
			res, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(c Chunk) error {
				got = append(got, c)
				if len(got) == 1 {
					<-produced
				}
				return nil
			})
			if err != nil || res.FinishReason != FinishStop || res.CompletionTokens != uint32(len(out)) {
				t.Fatalf("Generate() = %+v, %v; want stop with %d tokens", res, err, len(out))
			}
			if want, have := joined(out), joined(got); !slices.Equal(have.TokenIDs, want.TokenIDs) || have.Text != want.Text {
				t.Errorf("host received %v %q, want the engine's %v %q", have.TokenIDs, have.Text, want.TokenIDs, want.Text)
			}
			t.Logf("%d chunks arrived as %d", len(out), len(got))
		})
	}
}

// TestIdlePathSendsEachChunkAtOnce: with nothing waiting, a chunk reaches
// the host's send before the engine produces the next one: merging never
// holds a chunk back to wait for more.
func TestIdlePathSendsEachChunkAtOnce(t *testing.T) {
	t.Parallel()
	for _, p := range pluginPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			out := mergeOutput(20)
			delivered, generated := make(chan Chunk), make(chan struct{})
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(ctx context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				defer close(generated)
				for i, c := range out {
					if err := send(c); err != nil {
						return Result{}, err
					}
					// The next chunk only once this one has reached the host.
					select {
					case d := <-delivered:
						if !slices.Equal(d.TokenIDs, c.TokenIDs) || d.Text != c.Text {
							return Result{}, fmt.Errorf("chunk %d: host got %v %q, want %v %q", i, d.TokenIDs, d.Text, c.TokenIDs, c.Text)
						}
					case <-time.After(waitFor):
						return Result{}, fmt.Errorf("chunk %d did not reach the host's send before the next was produced", i)
					case <-ctx.Done():
						return Result{}, ctx.Err()
					}
				}
				return Result{FinishReason: FinishStop}, nil
			}})
			res, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(c Chunk) error {
				select {
				case delivered <- c:
				case <-generated:
				}
				return nil
			})
			if err != nil || res.FinishReason != FinishStop {
				t.Fatalf("Generate() = %+v, %v; want stop, nil", res, err)
			}
		})
	}
}

// TestSendFailureAborts: a send to the next hop that fails makes the
// adapter's send return that error, though sends are asynchronous, so the
// adapter aborts the engine request; Generate returns the error.
func TestSendFailureAborts(t *testing.T) {
	t.Parallel()
	errHop := errors.New("next hop failed")
	t.Run("adapter", func(t *testing.T) {
		t.Parallel()
		aborted := make(chan error, 1)
		srv := &engineServer{impl: &stubGenerator{generate: func(_ context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
			// An engine that goes on until send fails.
			for i := 0; ; i++ {
				if err := send(Chunk{TokenIDs: []uint32{uint32(i)}, Text: "x"}); err != nil {
					aborted <- err
					return Result{}, err
				}
			}
		}}}
		stream := &fakeServerStream{ctx: t.Context(), send: func(*pluginv1.GenerateResponse) error { return errHop }}
		within(t, "Generate", func() {
			if err := srv.Generate(&pluginv1.GenerateRequest{RequestId: "r"}, stream); err == nil {
				t.Error("Generate() = nil, want the send's error")
			}
		})
		if err := <-aborted; !errors.Is(err, errHop) {
			t.Errorf("adapter's send returned %v, want the next hop's %v", err, errHop)
		}
	})
	for _, p := range pluginPaths {
		t.Run("host/"+p.name, func(t *testing.T) {
			t.Parallel()
			engineDone := make(chan error, 1)
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(ctx context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				for i := 0; ; i++ {
					if err := send(Chunk{TokenIDs: []uint32{uint32(i)}}); err != nil {
						engineDone <- ctx.Err()
						return Result{}, err
					}
				}
			}})
			within(t, "Generate", func() {
				_, err := e.(Generator).Generate(t.Context(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(Chunk) error { return errHop })
				if !errors.Is(err, errHop) {
					t.Errorf("Generate() = %v, want the send's error", err)
				}
			})
			select {
			case err := <-engineDone:
				if err == nil {
					t.Error("the adapter's send failed, but its request context did not end")
				}
			case <-time.After(waitFor):
				t.Error("the adapter went on generating after the host's send failed")
			}
		})
	}
}

// TestCancelAbortsWithSlowHop: ctx ending while the next hop is slow
// (sends blocked, chunks waiting) ends the adapter's send with an error and
// Generate promptly, on both sides.
func TestCancelAbortsWithSlowHop(t *testing.T) {
	t.Parallel()
	t.Run("adapter", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		// Chunks of 30,000 bytes: with the first being sent, the next
		// three fill the queue and the fourth send waits for room.
		big := strings.Repeat("日本", 5_000)
		sendErr, filled := make(chan error, 1), make(chan struct{})
		srv := &engineServer{impl: &stubGenerator{generate: func(_ context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
			for i := 0; ; i++ {
				if err := send(Chunk{TokenIDs: []uint32{uint32(i)}, Text: big}); err != nil {
					sendErr <- err
					return Result{}, err
				}
				if i == 3 {
					close(filled)
				}
			}
		}}}
		// A host that stopped reading: the first send blocks until the
		// stream's context ends, as gRPC's does with flow control; the
		// context ends once the queue is full.
		stream := &fakeServerStream{ctx: ctx, send: func(*pluginv1.GenerateResponse) error {
			<-filled
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}}
		within(t, "Generate", func() {
			if err := srv.Generate(&pluginv1.GenerateRequest{RequestId: "r"}, stream); err == nil {
				t.Error("Generate() = nil, want an error")
			}
		})
		if err := <-sendErr; err == nil {
			t.Error("adapter's send returned nil after cancellation")
		}
	})
	for _, p := range pluginPaths {
		t.Run("host/"+p.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			engineDone := make(chan error, 1)
			e := testPluginEngineOn(t, p.mux, &stubGenerator{generate: func(ectx context.Context, _ GenerateRequest, send func(Chunk) error) (Result, error) {
				for i := 0; ; i++ {
					if err := send(Chunk{TokenIDs: []uint32{uint32(i)}}); err != nil {
						engineDone <- ectx.Err()
						return Result{}, err
					}
				}
			}})
			var afterCancel int
			_, err := e.(Generator).Generate(ctx, GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, func(Chunk) error {
				if ctx.Err() != nil {
					afterCancel++
				}
				cancel()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Generate() = %v, want context.Canceled", err)
			}
			if afterCancel > 0 {
				t.Errorf("send called %d times after ctx ended, want 0", afterCancel)
			}
			select {
			case err := <-engineDone:
				if err == nil {
					t.Error("the adapter's request context did not end")
				}
			case <-time.After(waitFor):
				t.Error("the adapter went on generating after ctx ended")
			}
		})
	}
}
