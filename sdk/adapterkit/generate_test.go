package adapterkit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// msg is an engine response in these tests: new tokens, and a finish
// reason on the last.
type msg struct {
	ids    []uint32
	finish sdk.FinishReason
}

// script is an engine stream that answers its messages, then err (io.EOF
// when nil). recv, if set, runs before each Recv.
type script struct {
	msgs []*msg
	err  error
	recv func()
}

func (s *script) Recv() (*msg, error) {
	if s.recv != nil {
		s.recv()
	}
	if len(s.msgs) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

// generation relays s; aborted records the ids Abort was called with.
func generation(s *script, openErr error, aborted *[]string) adapterkit.Generation[msg] {
	return adapterkit.Generation[msg]{
		Engine:    "Toy",
		RequestID: "r1",
		Open: func(context.Context) (adapterkit.Stream[msg], error) {
			if openErr != nil {
				return nil, openErr
			}
			return s, nil
		},
		Next: func(m *msg, res *sdk.Result) sdk.Chunk {
			res.CompletionTokens += uint32(len(m.ids))
			if m.finish != sdk.FinishUnknown {
				res.FinishReason = m.finish
			}
			return sdk.Chunk{TokenIDs: m.ids}
		},
		Abort: func(ctx context.Context, id string) error {
			if ctx.Err() != nil {
				return ctx.Err() // the abort must outlive the cancelled caller
			}
			*aborted = append(*aborted, id)
			return nil
		},
	}
}

func TestRelay(t *testing.T) {
	t.Parallel()
	s := &script{msgs: []*msg{{ids: []uint32{1, 2}}, {}, {ids: []uint32{3}, finish: sdk.FinishStop}}}
	var got [][]uint32
	var aborted []string
	res, err := adapterkit.Relay(t.Context(), generation(s, nil, &aborted), func(c sdk.Chunk) error {
		got = append(got, c.TokenIDs)
		return nil
	})
	if err != nil {
		t.Fatalf("Relay() = %v, want nil", err)
	}
	// The empty message sends nothing.
	if diff := cmp.Diff([][]uint32{{1, 2}, {3}}, got); diff != "" {
		t.Errorf("chunks sent (-want +got):\n%s", diff)
	}
	if want := (sdk.Result{FinishReason: sdk.FinishStop, CompletionTokens: 3}); res != want {
		t.Errorf("result = %+v, want %+v", res, want)
	}
	if len(aborted) != 0 {
		t.Errorf("aborted %v, want nothing aborted", aborted)
	}
}

// TestRelaySendsPromptLogprobs: a message with only the prompt's logprobs
// (vLLM's first, SGLang's last) is output to send, even with no tokens; an
// empty prompt's too.
func TestRelaySendsPromptLogprobs(t *testing.T) {
	t.Parallel()
	for _, prompt := range [][]sdk.TokenLogprob{{{Chosen: sdk.Logprob{TokenID: 7, Unknown: true}}}, {}} {
		s := &script{msgs: []*msg{{}, {ids: []uint32{3}, finish: sdk.FinishStop}}}
		g := generation(s, nil, new([]string))
		next := g.Next
		g.Next = func(m *msg, res *sdk.Result) sdk.Chunk {
			c := next(m, res)
			if len(m.ids) == 0 {
				c.PromptLogprobs = prompt
			}
			return c
		}
		var got []sdk.Chunk
		if _, err := adapterkit.Relay(t.Context(), g, func(c sdk.Chunk) error { got = append(got, c); return nil }); err != nil {
			t.Fatalf("Relay() = %v, want nil", err)
		}
		want := []sdk.Chunk{{PromptLogprobs: prompt}, {TokenIDs: []uint32{3}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("chunks sent (-want +got):\n%s", diff)
		}
	}
}

// TestRelayAborts: a caller that goes away, or a send that fails, aborts
// the engine request by its id, on a context that outlives the caller's.
func TestRelayAborts(t *testing.T) {
	t.Parallel()
	errSend := errors.New("client gone")
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		s := &script{msgs: []*msg{{ids: []uint32{1}}}, err: status.Error(codes.Canceled, "context canceled")}
		s.recv = func() {
			if len(s.msgs) == 0 {
				cancel() // the caller leaves while the engine generates
			}
		}
		var aborted []string
		_, err := adapterkit.Relay(ctx, generation(s, nil, &aborted), func(sdk.Chunk) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Relay() = %v, want context.Canceled", err)
		}
		if diff := cmp.Diff([]string{"r1"}, aborted); diff != "" {
			t.Errorf("aborted (-want +got):\n%s", diff)
		}
	})
	t.Run("send fails", func(t *testing.T) {
		t.Parallel()
		s := &script{msgs: []*msg{{ids: []uint32{1}}, {ids: []uint32{2}, finish: sdk.FinishStop}}}
		var aborted []string
		_, err := adapterkit.Relay(t.Context(), generation(s, nil, &aborted), func(sdk.Chunk) error { return errSend })
		if !errors.Is(err, errSend) {
			t.Errorf("Relay() = %v, want the send error", err)
		}
		if diff := cmp.Diff([]string{"r1"}, aborted); diff != "" {
			t.Errorf("aborted (-want +got):\n%s", diff)
		}
	})
}

// TestRelayErrors: engine errors keep their class before output; after
// it only a lost engine keeps one (the stream may be resumed elsewhere); a
// stream without a finish reason is an error.
func TestRelayErrors(t *testing.T) {
	t.Parallel()
	unavailable := status.Error(codes.Unavailable, "engine is sleeping")
	tests := map[string]struct {
		s         *script
		openErr   error
		wantClass error // nil: no class
		want      string
	}{
		"open refused":           {s: &script{}, openErr: unavailable, wantClass: sdk.ErrUnavailable, want: "Toy: engine is sleeping"},
		"refused before output":  {s: &script{err: unavailable}, wantClass: sdk.ErrUnavailable, want: "Toy: engine is sleeping"},
		"lost after output":      {s: &script{msgs: []*msg{{ids: []uint32{1}}}, err: unavailable}, wantClass: sdk.ErrUnavailable, want: "Toy request failed mid-stream: unavailable: engine is sleeping"},
		"failed after output":    {s: &script{msgs: []*msg{{ids: []uint32{1}}}, err: status.Error(codes.Internal, "boom")}, want: "Toy request failed mid-stream: Internal: boom"},
		"ended without a finish": {s: &script{msgs: []*msg{{ids: []uint32{1}}}}, want: "Toy ended request r1 without a finish reason"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var aborted []string
			_, err := adapterkit.Relay(t.Context(), generation(tt.s, tt.openErr, &aborted), func(sdk.Chunk) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Relay() = %v, want an error containing %q", err, tt.want)
			}
			for _, class := range []error{sdk.ErrUnavailable, sdk.ErrInvalidArgument} {
				if got := errors.Is(err, class); got != (class == tt.wantClass) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, class, got, !got)
				}
			}
			if _, ok := status.FromError(err); ok {
				t.Errorf("Relay() = %v carries the engine's status; want it out of the chain", err)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err     error
		started bool
		class   error // nil: none
		want    string
	}{
		"invalid argument":   {status.Error(codes.InvalidArgument, "max_tokens too large"), false, sdk.ErrInvalidArgument, "Toy rejected the request: max_tokens too large"},
		"unavailable":        {status.Error(codes.Unavailable, "down"), false, sdk.ErrUnavailable, "Toy: down"},
		"resource exhausted": {status.Error(codes.ResourceExhausted, "queue full"), false, sdk.ErrUnavailable, "Toy: queue full"},
		"internal":           {status.Error(codes.Internal, "boom"), false, nil, "Toy request failed: Internal: boom"},
		"not a status":       {errors.New("eof"), false, nil, "Toy request failed: Unknown: eof"},
		"after output":       {status.Error(codes.InvalidArgument, "late"), true, nil, "Toy request failed mid-stream: InvalidArgument: late"},
		"lost after output":  {status.Error(codes.Unavailable, "gone"), true, sdk.ErrUnavailable, "Toy request failed mid-stream: unavailable: gone"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := adapterkit.Classify("Toy", tt.err, tt.started)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Classify() = %q, want it to contain %q", err, tt.want)
			}
			for _, class := range []error{sdk.ErrUnavailable, sdk.ErrInvalidArgument} {
				if got := errors.Is(err, class); got != (class == tt.class) {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, class, got, !got)
				}
			}
		})
	}
}

// blocking is an engine stream that sends nothing until its context ends
// or release closes, then ends as the engine does for an aborted request.
type blocking struct {
	ctx     context.Context
	release chan struct{}
	ended   bool
}

func (b *blocking) Recv() (*msg, error) {
	if b.ended {
		return nil, io.EOF
	}
	select {
	case <-b.ctx.Done():
		return nil, status.FromContextError(b.ctx.Err()).Err()
	case <-b.release:
		b.ended = true
		return &msg{finish: sdk.FinishCancelled}, nil
	}
}

// inFlight relays a generation on a's InFlight whose stream blocks until
// aborted; its Abort records each id, noting whether the engine connection
// was still open, and releases the stream. opened is closed once the
// stream is open.
type inFlight struct {
	mu      sync.Mutex
	aborts  []string
	open    []bool // the connection was open at each abort
	opened  chan struct{}
	release chan struct{}
}

func (f *inFlight) generation(a *adapterkit.Adapter) adapterkit.Generation[msg] {
	f.opened, f.release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	return adapterkit.Generation[msg]{
		Engine:    "Toy",
		RequestID: "r1",
		Open: func(ctx context.Context) (adapterkit.Stream[msg], error) {
			defer close(f.opened)
			return &blocking{ctx: ctx, release: f.release}, nil
		},
		Next: func(m *msg, res *sdk.Result) sdk.Chunk { res.FinishReason = m.finish; return sdk.Chunk{} },
		Abort: func(ctx context.Context, id string) error {
			_, err := a.Conn()
			f.mu.Lock()
			f.aborts, f.open = append(f.aborts, id), append(f.open, err == nil)
			f.mu.Unlock()
			once.Do(func() { close(f.release) })
			return nil
		},
		InFlight: a.InFlight(),
	}
}

// TestShutdownAbortsInFlight: Shutdown aborts a generation still in
// flight, once, before it closes the engine connection, also when the
// generation's caller goes away at the same moment (the host cut the
// request and shuts the adapter down at once).
func TestShutdownAbortsInFlight(t *testing.T) {
	t.Parallel()
	for _, callerLeaves := range []bool{false, true} {
		t.Run(fmt.Sprintf("caller leaves %v", callerLeaves), func(t *testing.T) {
			t.Parallel()
			a := start(t, spec(true), serveEngine(t, nil, "a").addr)
			var f inFlight
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			g := f.generation(a)
			done := make(chan error, 1)
			go func() {
				_, err := adapterkit.Relay(ctx, g, func(sdk.Chunk) error { return nil })
				done <- err
			}()
			receive(t, f.opened, "open stream")
			if callerLeaves {
				cancel()
			}
			if err := a.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown() = %v, want nil", err)
			}
			f.mu.Lock()
			aborts, open := f.aborts, f.open
			f.mu.Unlock()
			if diff := cmp.Diff([]string{"r1"}, aborts); diff != "" {
				t.Errorf("aborted by the time Shutdown returned (-want +got):\n%s", diff)
			}
			if len(open) == 1 && !open[0] {
				t.Error("the abort found the engine connection closed: Shutdown closed it first")
			}
			receive(t, done, "Relay return")
			if got := a.InFlight().Len(); got != 0 {
				t.Errorf("%d generations in flight after Relay returned, want 0", got)
			}
		})
	}
}

// TestRelayWithoutAbort: with no Abort, the stream's close is the abort:
// Relay ends the stream's context when the caller goes away, when send
// fails, and when Shutdown aborts the generation in flight.
func TestRelayWithoutAbort(t *testing.T) {
	t.Parallel()
	// open relays a stream that sends one token, then blocks until its
	// context ends; streamCtx is that context, once open.
	open := func(streamCtx chan<- context.Context) adapterkit.Generation[msg] {
		first := true
		return adapterkit.Generation[msg]{
			Engine: "Toy", RequestID: "r1",
			Open: func(ctx context.Context) (adapterkit.Stream[msg], error) {
				streamCtx <- ctx
				return &script{recv: func() {
					if !first {
						<-ctx.Done()
					}
					first = false
				}, msgs: []*msg{{ids: []uint32{1}}}, err: status.Error(codes.Canceled, "context canceled")}, nil
			},
			Next: func(m *msg, _ *sdk.Result) sdk.Chunk { return sdk.Chunk{TokenIDs: m.ids} },
		}
	}
	closed := func(t *testing.T, ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Error("the engine stream is still open, want it closed: the close is the abort")
		}
	}
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		streams := make(chan context.Context, 1)
		_, err := adapterkit.Relay(ctx, open(streams), func(sdk.Chunk) error { cancel(); return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Relay() = %v, want context.Canceled", err)
		}
		closed(t, <-streams)
	})
	t.Run("send fails", func(t *testing.T) {
		t.Parallel()
		errSend := errors.New("client gone")
		streams := make(chan context.Context, 1)
		if _, err := adapterkit.Relay(t.Context(), open(streams), func(sdk.Chunk) error { return errSend }); !errors.Is(err, errSend) {
			t.Errorf("Relay() = %v, want the send error", err)
		}
		closed(t, <-streams)
	})
	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		a := start(t, spec(true), serveEngine(t, nil, "a").addr)
		streams := make(chan context.Context, 1)
		g := open(streams)
		g.InFlight = a.InFlight()
		sent := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := adapterkit.Relay(t.Context(), g, func(sdk.Chunk) error { close(sent); return nil })
			done <- err
		}()
		receive(t, sent, "first chunk")
		if err := a.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown() = %v, want nil", err)
		}
		closed(t, <-streams)
		receive(t, done, "Relay return")
	})
}
