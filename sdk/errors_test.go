package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestErrorClassRoundTrip sends each error class through toStatus and back
// through fromStatus, as an error crosses the plugin boundary.
func TestErrorClassRoundTrip(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err      error
		wantCode codes.Code
		want     error // the class the host sees
	}{
		"invalid argument": {
			err:      fmt.Errorf("%w: engine address %q: want host:port", ErrInvalidArgument, "nope"),
			wantCode: codes.InvalidArgument,
			want:     ErrInvalidArgument,
		},
		"field error": {
			err:      &FieldError{Field: FieldEngineAddr, Problem: `"nope": want host:port`},
			wantCode: codes.InvalidArgument,
			want:     ErrInvalidArgument,
		},
		"startup deadline": {
			err:      fmt.Errorf("%w: engine at 127.0.0.1:1 did not serve within 300ms", ErrStartupDeadline),
			wantCode: codes.DeadlineExceeded,
			want:     ErrStartupDeadline,
		},
		"already started": {
			err:      fmt.Errorf("%w: vLLM adapter", ErrAlreadyStarted),
			wantCode: codes.AlreadyExists,
			want:     ErrAlreadyStarted,
		},
		"not started": {
			err:      fmt.Errorf("%w: WatchAvailability before Start", ErrNotStarted),
			wantCode: codes.FailedPrecondition,
			want:     ErrNotStarted,
		},
		"unavailable": {
			err:      fmt.Errorf("%w: engine is sleeping", ErrUnavailable),
			wantCode: codes.Unavailable,
			want:     ErrUnavailable,
		},
		"unimplemented": {
			err:      fmt.Errorf("%w: the adapter does not forward requests", ErrUnimplemented),
			wantCode: codes.Unimplemented,
			want:     ErrUnimplemented,
		},
		"bare sentinel": {
			err:      ErrNotStarted,
			wantCode: codes.FailedPrecondition,
			want:     ErrNotStarted,
		},
		"context canceled": {
			err:      context.Canceled,
			wantCode: codes.Canceled,
			want:     context.Canceled,
		},
		"wrapped context canceled": {
			err:      fmt.Errorf("waiting for engine at 127.0.0.1:1: %w", context.Canceled),
			wantCode: codes.Canceled,
			want:     context.Canceled,
		},
		"context deadline": {
			err:      context.DeadlineExceeded,
			wantCode: codes.DeadlineExceeded,
			want:     context.DeadlineExceeded,
		},
		// An adapter may wrap the engine's own gRPC error as well as a
		// class; the class decides the code.
		"class wrapping an engine status": {
			err:      fmt.Errorf("%w: engine answered: %w", ErrUnavailable, status.Error(codes.ResourceExhausted, "queue full")),
			wantCode: codes.Unavailable,
			want:     ErrUnavailable,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wire := toStatus(tt.err)
			if got := status.Code(wire); got != tt.wantCode {
				t.Errorf("toStatus(%q) code = %v, want %v", tt.err, got, tt.wantCode)
			}
			got := fromStatus(wire, nil)
			if !errors.Is(got, tt.want) {
				t.Errorf("fromStatus(toStatus(%q)) = %v, want an error wrapping %q", tt.err, got, tt.want)
			}
			if got.Error() != tt.err.Error() {
				t.Errorf("message after the round trip = %q, want %q", got.Error(), tt.err.Error())
			}
		})
	}
}

// TestErrorClassesAreDistinct: an error comes back as its own class only.
func TestErrorClassesAreDistinct(t *testing.T) {
	t.Parallel()
	classes := []error{ErrInvalidArgument, ErrStartupDeadline, ErrAlreadyStarted, ErrNotStarted,
		ErrUnavailable, ErrUnimplemented, ErrPluginExited, context.Canceled, context.DeadlineExceeded}
	for _, class := range []error{ErrInvalidArgument, ErrStartupDeadline, ErrAlreadyStarted, ErrNotStarted, ErrUnavailable, ErrUnimplemented} {
		got := fromStatus(toStatus(fmt.Errorf("%w: detail", class)), nil)
		for _, other := range classes {
			if other != class && errors.Is(got, other) {
				t.Errorf("round trip of %q wraps %q too, want only %q", class, other, class)
			}
		}
	}
}

// TestFieldErrorRoundTrip: the field at fault survives the boundary, bare
// or wrapped by the adapter, with the adapter's message intact.
func TestFieldErrorRoundTrip(t *testing.T) {
	t.Parallel()
	field := &FieldError{Field: FieldOptions, Problem: `"tp": unknown key; this adapter accepts mode`}
	tests := map[string]error{
		"bare":    field,
		"wrapped": fmt.Errorf("vLLM adapter: %w", field),
	}
	for name, sent := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := fromStatus(toStatus(sent), nil)
			var fe *FieldError
			if !errors.As(got, &fe) {
				t.Fatalf("fromStatus(toStatus(%q)) = %v, want a *FieldError inside", sent, got)
			}
			if diff := cmp.Diff(field, fe); diff != "" {
				t.Errorf("field error after the round trip mismatch (-want +got):\n%s", diff)
			}
			if !errors.Is(got, ErrInvalidArgument) || got.Error() != sent.Error() {
				t.Errorf("after the round trip: %q, want %q wrapping ErrInvalidArgument", got, sent)
			}
		})
	}
	t.Run("plain invalid argument has no field", func(t *testing.T) {
		t.Parallel()
		got := fromStatus(toStatus(fmt.Errorf("%w: mode", ErrInvalidArgument)), nil)
		if fe := (*FieldError)(nil); errors.As(got, &fe) {
			t.Errorf("fromStatus(toStatus(plain)) = %#v, want no *FieldError", fe)
		}
	})
}

func TestFieldErrorMessage(t *testing.T) {
	t.Parallel()
	err := &FieldError{Field: FieldHealthFailures, Problem: "0: must be 1 or more"}
	if want := "invalid argument: HealthPolicy.Failures 0: must be 1 or more"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestToStatus(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err      error
		wantCode codes.Code
		wantMsg  string
	}{
		"nil": {err: nil, wantCode: codes.OK},
		"unclassified error": {
			err:      errors.New("reading vLLM model info: boom"),
			wantCode: codes.Unknown,
			wantMsg:  "reading vLLM model info: boom",
		},
		"status passes through": {
			err:      status.Error(codes.ResourceExhausted, "queue full"),
			wantCode: codes.ResourceExhausted,
			wantMsg:  "queue full",
		},
		"wrapped status keeps its code": {
			err:      fmt.Errorf("reading vLLM server info: %w", status.Error(codes.Internal, "boom")),
			wantCode: codes.Internal,
			wantMsg:  "reading vLLM server info: rpc error: code = Internal desc = boom",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := toStatus(tt.err)
			if tt.err == nil {
				if got != nil {
					t.Fatalf("toStatus(nil) = %v, want nil", got)
				}
				return
			}
			st := status.Convert(got)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Errorf("toStatus(%q) = %v %q, want %v %q", tt.err, st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestFromStatus(t *testing.T) {
	t.Parallel()
	plain := errors.New("not a status")
	exited := func() bool { return true }
	running := func() bool { return false }
	tests := map[string]struct {
		err     error
		exited  func() bool
		want    error // nil: wraps no class
		wantMsg string
	}{
		"unavailable while the adapter runs": {
			err:     status.Error(codes.Unavailable, "connection reset"),
			exited:  running,
			want:    ErrUnavailable,
			wantMsg: "connection reset",
		},
		"unavailable after the adapter exited": {
			err:     status.Error(codes.Unavailable, "connection reset"),
			exited:  exited,
			want:    ErrPluginExited,
			wantMsg: "adapter process exited: connection reset",
		},
		"host deadline": {
			err:     status.FromContextError(context.DeadlineExceeded).Err(),
			want:    context.DeadlineExceeded,
			wantMsg: "context deadline exceeded",
		},
		"unknown code names the adapter": {
			err:     status.Error(codes.Internal, "boom"),
			wantMsg: "adapter: boom",
		},
		"not a status is kept": {
			err:     plain,
			want:    plain,
			wantMsg: "not a status",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := fromStatus(tt.err, tt.exited)
			if got == nil {
				t.Fatalf("fromStatus(%v) = nil, want an error", tt.err)
			}
			if tt.want != nil && !errors.Is(got, tt.want) {
				t.Errorf("fromStatus(%v) = %v, want an error wrapping %q", tt.err, got, tt.want)
			}
			if got.Error() != tt.wantMsg {
				t.Errorf("fromStatus(%v) message = %q, want %q", tt.err, got.Error(), tt.wantMsg)
			}
		})
	}
	if got := fromStatus(nil, exited); got != nil {
		t.Errorf("fromStatus(nil) = %v, want nil", got)
	}
}

// TestContextErr: a context past its deadline has ended, even before its
// own timer has set ctx.Err.
func TestContextErr(t *testing.T) {
	t.Parallel()
	if err := ContextErr(t.Context()); err != nil {
		t.Errorf("ContextErr(live) = %v, want nil", err)
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ContextErr(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("ContextErr(canceled) = %v, want context.Canceled", err)
	}
	// A deadline in the past whose timer cannot have fired: WithDeadline
	// would cancel at once, so the deadline is carried by hand.
	past := deadlineOnly{t.Context(), time.Now().Add(-time.Second)}
	if err := ContextErr(past); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ContextErr(past deadline, Err nil) = %v, want context.DeadlineExceeded", err)
	}
}

// deadlineOnly reports a deadline without ever ending.
type deadlineOnly struct {
	context.Context
	dl time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.dl, true }
