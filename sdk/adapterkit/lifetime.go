package adapterkit

import (
	"context"
	"fmt"
	"time"

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
// one reconnect and reads the lifetime id, within policy.Timeout; a
// different id, a failed reconnect or a failed read is Lost, the same id
// carries on. Without a lifetime id to compare (read nil or want empty)
// the connection closing is Lost at once.
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
				// Once the connection leaves READY the id is read, even if
				// a call has brought it back already: a reconnect that
				// quick may have reached another engine.
				st := conn.GetState()
				if st == connectivity.Ready && !conn.WaitForStateChange(ctx, st) {
					return
				}
				if st = conn.GetState(); read == nil || want == "" {
					emit(ctx, out, event(sdk.Lost, timeNow(), "%s closed (%s), and the engine has no lifetime id to tell a restarted engine apart", name, st))
					return
				}
				got, err := reread(ctx, conn, policy, read)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					emit(ctx, out, event(sdk.Lost, timeNow(), "%s closed and the engine's lifetime id could not be read again: %v", name, err))
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

// sameLifetime is the lifetime check of a health Watch stream reopened
// after a recycled connection (healthwatch.WatchOptions.Reopened): it reads
// the lifetime id, and another id or a failed read is an error, which ends
// that watch Lost, the statuses it held unseen. A replaced engine's
// statuses (NOT_SERVING, then SERVING as it loads) would otherwise reach
// the host before LifetimeSource tells its loss. Without a lifetime id
// (read nil or want empty) it is nil: nothing is held, and LifetimeSource
// takes the closed connection for a loss.
func sameLifetime(want string, read func(context.Context) (string, error)) func(context.Context) error {
	if read == nil || want == "" {
		return nil
	}
	return func(ctx context.Context) error {
		got, err := read(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("the engine's lifetime id could not be read again: %w", err)
		case got != want:
			return fmt.Errorf("engine replaced: instance id %q, was %q", got, want)
		}
		return nil
	}
}

// reread reconnects and reads the lifetime id, within policy.Timeout. A
// failed reconnect ends it at once: the same engine, reached through a
// connection that merely dropped, answers at once, and anything else is
// lost either way.
func reread(ctx context.Context, conn *grpc.ClientConn, policy sdk.HealthPolicy, read func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, policy.Timeout)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if st == connectivity.TransientFailure || st == connectivity.Shutdown {
			return "", fmt.Errorf("reconnecting: connection %s", st)
		}
		if !conn.WaitForStateChange(ctx, st) {
			return "", fmt.Errorf("reconnecting: connection %s: %w", st, ctx.Err())
		}
	}
	return read(ctx)
}

// settle waits, within d, for conn's reported state to catch up with the
// calls that just succeeded on it: gRPC lets calls through a moment before
// it reports READY, and LifetimeSource takes any other state for an engine
// that went away.
func settle(ctx context.Context, conn *grpc.ClientConn, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for st := conn.GetState(); st == connectivity.Connecting; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}
