package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error classes that keep their meaning across the plugin boundary: an error
// wrapping one of them travels as its gRPC code and comes back wrapping the
// same sentinel, with the message intact.
var (
	// ErrInvalidArgument: the request names a bad field or option. A
	// refused request field's message starts with its wire name and a
	// colon, "invalid argument: min_p: ...", which the router turns into
	// the OpenAI error's param.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrStartupDeadline: the engine did not serve within the startup deadline.
	ErrStartupDeadline = errors.New("startup deadline exceeded")
	// ErrAlreadyStarted: Start was called twice.
	ErrAlreadyStarted = errors.New("already started")
	// ErrNotStarted: a method that needs Start was called before it.
	ErrNotStarted = errors.New("not started")
	// ErrUnavailable: the engine cannot take the call now.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnimplemented: the adapter does not implement the method.
	ErrUnimplemented = errors.New("unimplemented")
	// ErrPluginExited: the adapter process is gone.
	ErrPluginExited = errors.New("adapter process exited")
)

// FieldError is an ErrInvalidArgument that names the one request field at
// fault, so that a host can point at its own setting for that field: vigil
// names the flag that sets it. It crosses the plugin boundary as a
// google.rpc.BadRequest field violation (Field, and Problem as its
// description) in the INVALID_ARGUMENT status, and the host gets it back
// with errors.As, inside an error whose message is the adapter's.
type FieldError struct {
	// Field is the field's Go name qualified by its type: one of the Field
	// constants, such as FieldEngineAddr.
	Field string
	// Problem is the bad value and what the field accepts, value first, as
	// in `"localhost": want host:port`.
	Problem string
}

// The request fields a FieldError names, each by its Go name qualified by
// its type. FieldOptions stands for every engine option; the Problem names
// the keys.
const (
	FieldEngineAddr      = "StartRequest.EngineAddr"
	FieldStartupDeadline = "StartRequest.StartupDeadline"
	FieldOptions         = "StartRequest.Options"
	FieldHealthInterval  = "HealthPolicy.Interval"
	FieldHealthTimeout   = "HealthPolicy.Timeout"
	FieldHealthFailures  = "HealthPolicy.Failures"
	FieldHealthRetryMax  = "HealthPolicy.RetryMax"
	FieldHealthConfirm   = "HealthPolicy.Confirm"
)

// Error reads "invalid argument: <Field> <Problem>".
func (e *FieldError) Error() string {
	return ErrInvalidArgument.Error() + ": " + e.Field + " " + e.Problem
}

// Unwrap returns ErrInvalidArgument, the error's class.
func (e *FieldError) Unwrap() error { return ErrInvalidArgument }

var classCodes = []struct {
	err  error
	code codes.Code
}{
	{ErrInvalidArgument, codes.InvalidArgument},
	{ErrStartupDeadline, codes.DeadlineExceeded},
	{ErrAlreadyStarted, codes.AlreadyExists},
	{ErrNotStarted, codes.FailedPrecondition},
	{ErrUnavailable, codes.Unavailable},
	{ErrUnimplemented, codes.Unimplemented},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// toStatus turns an adapter error into a gRPC status error for the wire.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	// Classes first: an adapter error may wrap both a class and a gRPC
	// status from the engine, and the class is what the host acts on.
	for _, c := range classCodes {
		if errors.Is(err, c.err) {
			return withField(status.New(c.code, err.Error()), err).Err()
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromStatus turns a gRPC error from the adapter back into an error wrapping
// its class. exited reports whether the adapter process is gone, which turns
// transport failures into ErrPluginExited.
func fromStatus(err error, exited func() bool) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		if fe := fieldOf(st); fe != nil {
			return &classError{fe, msg}
		}
		return &classError{ErrInvalidArgument, msg}
	case codes.DeadlineExceeded:
		if ctxErr := contextClass(msg); ctxErr != nil {
			return &classError{ctxErr, msg}
		}
		return &classError{ErrStartupDeadline, msg}
	case codes.FailedPrecondition:
		return &classError{ErrNotStarted, msg}
	case codes.AlreadyExists:
		return &classError{ErrAlreadyStarted, msg}
	case codes.Unimplemented:
		return &classError{ErrUnimplemented, msg}
	case codes.Canceled:
		return &classError{context.Canceled, msg}
	case codes.Unavailable:
		if exited != nil && exited() {
			return &classError{ErrPluginExited, "adapter process exited: " + msg}
		}
		return &classError{ErrUnavailable, msg}
	}
	return fmt.Errorf("adapter: %s", msg)
}

// withField adds err's FieldError, if any, to st as a BadRequest field
// violation.
func withField(st *status.Status, err error) *status.Status {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return st
	}
	d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: fe.Field, Description: fe.Problem},
	}})
	if derr != nil {
		return st // the message still names the field
	}
	return d
}

// fieldOf reads the FieldError that withField sent, if any.
func fieldOf(st *status.Status) *FieldError {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			v := br.GetFieldViolations()[0]
			return &FieldError{Field: v.GetField(), Problem: v.GetDescription()}
		}
	}
	return nil
}

// contextClass recognises a context deadline that crossed the boundary as
// DEADLINE_EXCEEDED, as opposed to the engine's startup deadline.
func contextClass(msg string) error {
	if msg == context.DeadlineExceeded.Error() {
		return context.DeadlineExceeded
	}
	return nil
}

// classError carries a class (a sentinel, or a *FieldError, which wraps
// ErrInvalidArgument) and the original message.
type classError struct {
	class error
	msg   string
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// ContextErr is ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed, nil otherwise. gRPC can end a call for the deadline
// a moment before ctx's own timer fires, when ctx.Err() is still nil: use
// ContextErr to tell "the caller's context ended" from an engine error.
func ContextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
