package healthwatch

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
)

// CheckFunc asks for one service's status, as grpc.health.v1.Health/Check.
type CheckFunc func(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error)

// Checker returns a CheckFunc over conn. Each call fails fast (no
// wait-for-ready) so that a refused connection is an error at once.
func Checker(conn grpc.ClientConnInterface) CheckFunc {
	client := healthpb.NewHealthClient(conn)
	return func(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN, err
		}
		return resp.GetStatus(), nil
	}
}

// ReadyChecker returns a CheckFunc over conn whose calls wait (within their
// deadline) for the connection to be ready. While an engine is down, such a
// call returns as soon as gRPC's reconnect reaches the engine, instead of
// failing at once and leaving the next attempt to a retry delay: a waiting
// caller then sees the engine one reconnect after it listens.
func ReadyChecker(conn grpc.ClientConnInterface) CheckFunc {
	client := healthpb.NewHealthClient(conn)
	return func(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN, err
		}
		return resp.GetStatus(), nil
	}
}

// WaitOptions configures WaitServing and Wait.
type WaitOptions struct {
	// AttemptTimeout bounds each Check of WaitServing, so a server that
	// accepts connections but does not answer is retried. Default sdk.DefaultHealthTimeout.
	AttemptTimeout time.Duration
	// Backoff spaces the attempts. Default DefaultBackoff(sdk.DefaultRetryMax).
	Backoff Backoff
	// Clock is the time source of the backoff. Default SystemClock.
	Clock Clock
	// OnAttempt, if set, is called after each failed attempt with the
	// retry number and what was wrong, for logs.
	OnAttempt func(retry int, err error)
}

// WaitServing checks each of services until all report SERVING in one
// round, and returns nil then. Refused connections, errors, timeouts and
// other statuses are retried after a backoff delay. It returns ctx's error,
// wrapped with the last failure, when ctx ends first.
func WaitServing(ctx context.Context, check CheckFunc, services []string, opts WaitOptions) error {
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = sdk.DefaultHealthTimeout
	}
	return Wait(ctx, func(ctx context.Context) error {
		return checkAll(ctx, check, services, opts.AttemptTimeout)
	}, opts)
}

// Wait calls attempt until it returns nil, and returns nil then. Failed
// attempts are retried after opts.Backoff's delay, counted from the start of
// the failed attempt (opts.AttemptTimeout is WaitServing's, not Wait's: an
// attempt bounds its own calls). It returns ctx's error when ctx ends
// first, with the last failure that ctx did not cut short in its text.
func Wait(ctx context.Context, attempt func(context.Context) error, opts WaitOptions) error {
	if opts.Backoff.Max == 0 {
		opts.Backoff = DefaultBackoff(sdk.DefaultRetryMax)
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	var last error // of the last attempt that ctx did not cut short
	for retry := 0; ; retry++ {
		start := opts.Clock.Now()
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if sdk.ContextErr(ctx) == nil || last == nil {
			last = err
		}
		if opts.OnAttempt != nil {
			opts.OnAttempt(retry, err)
		}
		// Attempts start a backoff delay apart: an attempt that itself
		// waited that long (a ReadyChecker waiting for the connection) is
		// followed at once, so the wait never adds to gRPC's reconnect.
		wait := opts.Backoff.Delay(retry) - opts.Clock.Now().Sub(start)
		if wait <= 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-opts.Clock.After(wait):
		}
	}
}

func checkAll(ctx context.Context, check CheckFunc, services []string, timeout time.Duration) error {
	for _, svc := range services {
		actx, cancel := context.WithTimeout(ctx, timeout)
		st, err := check(actx, svc)
		cancel()
		if err != nil {
			return fmt.Errorf("health check of %q: %w", svc, err)
		}
		if st != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health check of %q: %s", svc, st)
		}
	}
	return nil
}
