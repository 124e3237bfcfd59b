package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
	"github.com/vigilhq/vigil/sdk/internal/wire"
)

// CheckStart reports the first bad field of req as a *sdk.FieldError that
// says what the field accepts: an engine address that is not host:port with
// a port from 1 to 65535, a negative startup deadline, a health policy out of
// range (sdk.HealthPolicy.Validate), or an engine option whose key is not in
// options.
func CheckStart(req sdk.StartRequest, options ...string) error {
	if err := checkAddr(req.EngineAddr); err != nil {
		return err
	}
	if req.StartupDeadline < 0 {
		return &sdk.FieldError{Field: sdk.FieldStartupDeadline, Problem: fmt.Sprintf("%s: must be a positive duration", req.StartupDeadline)}
	}
	if err := req.Health.Validate(); err != nil {
		return err
	}
	return checkOptionKeys(req.Options, options)
}

// checkOptionKeys refuses a key of opts that is not in options, the
// accepted keys.
func checkOptionKeys(opts map[string]string, options []string) error {
	var unknown []string
	for k := range opts {
		if !slices.Contains(options, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	accepted := "takes no engine options"
	if len(options) > 0 {
		accepted = "accepts " + strings.Join(options, ", ")
	}
	return &sdk.FieldError{Field: sdk.FieldOptions, Problem: strings.Join(unknown, ", ") + ": unknown key; this adapter " + accepted}
}

func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		n, perr := strconv.Atoi(port)
		switch {
		case perr != nil || n < 1 || n > 65535:
			err = fmt.Errorf("port %q: want a number from 1 to 65535", port)
		case strings.ContainsAny(host, "/ "):
			err = fmt.Errorf("host %q: want a host name or IP address", host)
		}
	}
	if err != nil {
		return &sdk.FieldError{Field: sdk.FieldEngineAddr, Problem: fmt.Sprintf("%q: want host:port: %v", addr, err)}
	}
	return nil
}

// Dial returns a client for an engine's plaintext gRPC address; it does not
// connect until the first call. Its options: a static HTTP/2 flow-control
// window for token streams, the plugin connection's, which turns off gRPC's
// BDP pings; gRPC's reconnect backoff capped at policy.RetryMax
// (healthwatch.ConnectParams), so an engine back after a long outage is
// found within that; and no idle timeout, because a connection that left
// READY is taken for an engine that went away (see Spec.LifetimeID). An
// address gRPC cannot parse is an *sdk.FieldError for sdk.FieldEngineAddr.
func Dial(addr string, policy sdk.HealthPolicy) (*grpc.ClientConn, error) {
	return dial(addr, policy)
}

// dial is Dial with extra options (Start's connTracker).
func dial(addr string, policy sdk.HealthPolicy, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, append(append(wire.StreamDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		healthwatch.ConnectParams(policy.WithDefaults().RetryMax),
		grpc.WithIdleTimeout(0),
	), extra...)...)
	if err != nil {
		return nil, &sdk.FieldError{Field: sdk.FieldEngineAddr, Problem: fmt.Sprintf("%q: %v", addr, err)}
	}
	return conn, nil
}

// startupError turns the end of a startup wait into the error Start
// returns: the caller's context ending is its own error, the startup
// deadline passing is sdk.ErrStartupDeadline.
func startupError(ctx context.Context, err error, engine, addr string, deadline fmt.Stringer) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s engine at %s did not serve within %s: %v", sdk.ErrStartupDeadline, engine, addr, deadline, err)
	}
	return fmt.Errorf("waiting for %s engine at %s: %w", engine, addr, err)
}
