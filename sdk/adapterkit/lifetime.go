package adapterkit

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/vigilhq/vigil/sdk"
)

// LifetimeSource follows the connection to the engine after Start, to tell
// a replaced engine from the one Start saw. gRPC reconnects on its own, so
// an engine killed and restarted on the same address between two checks is
// otherwise never noticed, whatever its health says.
//
// The source reports Serving at once. When the connection leaves READY (the
// engine closed it or went away): with read and want both set, it waits for
// the connection to be ready again and reads the lifetime id, each attempt
// under policy.Timeout and up to policy.Failures attempts; a different id,
// or no successful read, is Lost, the same id carries on. Without a
// lifetime id to compare (read nil or want empty) the connection closing is
// Lost at once.
//
// conn must not have an idle timeout (Dial sets none): going idle would
// look like the engine leaving.
func LifetimeSource(conn *grpc.ClientConn, policy sdk.HealthPolicy, want string, read func(context.Context) (string, error)) Source {
	policy = policy.WithDefaults()
	const name = "engine connection"
	return Source{Name: name, Follow: func(ctx context.Context) <-chan sdk.Event {
		out := make(chan sdk.Event)
		go func() {
			defer close(out)
			if !emit(ctx, out, event(sdk.Serving, timeNow(), "%s ready", name)) {
				return
			}
			for {
				st := conn.GetState()
				if st == connectivity.Ready {
					if !conn.WaitForStateChange(ctx, st) {
						return
					}
					continue
				}
				if read == nil || want == "" {
					emit(ctx, out, event(sdk.Lost, timeNow(), "%s closed (%s), and the engine has no lifetime id to tell a restarted engine apart", name, st))
					return
				}
				got, err := reread(ctx, conn, policy, read)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					emit(ctx, out, event(sdk.Lost, timeNow(), "%s closed and the lifetime id could not be read again: %v", name, err))
					return
				case got != want:
					emit(ctx, out, event(sdk.Lost, timeNow(), "engine replaced: instance id %q, was %q", got, want))
					return
				}
			}
		}()
		return out
	}}
}

// reread waits for conn to be ready and reads the lifetime id, up to
// policy.Failures attempts of policy.Timeout each.
func reread(ctx context.Context, conn *grpc.ClientConn, policy sdk.HealthPolicy, read func(context.Context) (string, error)) (string, error) {
	var err error
	for range policy.Failures {
		actx, cancel := context.WithTimeout(ctx, policy.Timeout)
		var id string
		if err = waitReady(actx, conn); err == nil {
			id, err = read(actx)
		}
		cancel()
		if err == nil || ctx.Err() != nil {
			return id, err
		}
	}
	return "", fmt.Errorf("%d attempts failed, last: %w", policy.Failures, err)
}

// waitReady returns once conn is READY, or ctx's error.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, st) {
			return fmt.Errorf("connection %s: %w", st, ctx.Err())
		}
	}
}
