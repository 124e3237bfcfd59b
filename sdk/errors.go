package sdk

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error classes that keep their meaning across the plugin boundary: an error
// wrapping one of them travels as its gRPC code and comes back wrapping the
// same sentinel, with the message intact.
var (
	// ErrInvalidArgument: the request names a bad field or option.
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
			return status.Error(c.code, err.Error())
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
			return &classError{ErrPluginExited, msg}
		}
		return &classError{ErrUnavailable, msg}
	}
	return fmt.Errorf("adapter: %s", msg)
}

// contextClass recognises a context deadline that crossed the boundary as
// DEADLINE_EXCEEDED, as opposed to the engine's startup deadline.
func contextClass(msg string) error {
	if msg == context.DeadlineExceeded.Error() {
		return context.DeadlineExceeded
	}
	return nil
}

// classError carries a class sentinel and the original message.
type classError struct {
	class error
	msg   string
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }
