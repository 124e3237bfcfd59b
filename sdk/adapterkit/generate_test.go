package adapterkit_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

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

// TestRelayErrors: engine errors keep their class before output, lose it
// after; a stream without a finish reason is an error.
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
		"failed after output":    {s: &script{msgs: []*msg{{ids: []uint32{1}}}, err: unavailable}, want: "Toy request failed mid-stream: Unavailable: engine is sleeping"},
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
