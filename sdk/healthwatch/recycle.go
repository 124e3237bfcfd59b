package healthwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// followRecycled follows the Watch stream and reopens it after a recycled
// connection: a stream that delivered a status and then ended UNAVAILABLE
// (a server's MaxConnectionAge, a proxy's connection limit: GOAWAY, and
// the connection closed after a grace) is opened again on the channel's
// new connection, and must deliver its first status within policy.Timeout.
// Statuses flow on as from one stream, so a recycle that finds the service
// SERVING reports nothing; with WatchOptions.Reopened they wait for its
// confirmation that the process is the same. A stream that cannot be reopened (the engine is
// gone: the reconnect is refused at once) returns the error, naming both
// ends; any other end is returned as it is.
func (w *watcher) followRecycled(ctx context.Context, obs chan<- Update) error {
	got, err := w.follow(ctx, obs, 0)
	for got && status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		var rerr error
		got, rerr = w.follow(ctx, obs, w.policy.Timeout)
		if !got {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w; reopening it: %v", err, rerr)
		}
		err = rerr
	}
	return err
}

// confirmReopened calls WatchOptions.Reopened, if set, under
// policy.Timeout; its error names the reopened watch.
func (w *watcher) confirmReopened(ctx context.Context) error {
	if w.reopened == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, w.policy.Timeout)
	defer cancel()
	if err := w.reopened(cctx); err != nil {
		return fmt.Errorf("confirming the reopened watch's engine: %w", err)
	}
	return nil
}

// errNoFirstStatus is follow's error for a reopened stream whose first
// status did not come in time.
var errNoFirstStatus = errors.New("no status")

// follow opens one Watch stream and emits its statuses until it ends; it
// reports whether the stream delivered any status, and the error that ended
// it. With first above 0 (a reopened stream) the first status must come
// within first, and is reported once confirmReopened passes. The call
// fails fast: a refused connection ends it at once.
func (w *watcher) follow(ctx context.Context, obs chan<- Update, first time.Duration) (bool, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var timer *time.Timer
	if first > 0 {
		timer = time.AfterFunc(first, func() { cancel(fmt.Errorf("%w within %s", errNoFirstStatus, first)) })
		defer timer.Stop()
	}
	stream, err := w.client.Watch(sctx, &healthpb.HealthCheckRequest{Service: w.service})
	got := false
	for err == nil {
		var resp *healthpb.HealthCheckResponse
		if resp, err = stream.Recv(); err != nil {
			break
		}
		if !got && timer != nil && !timer.Stop() {
			break // too late: the stream is being cut
		}
		if !got && first > 0 {
			if err = w.confirmReopened(ctx); err != nil {
				return false, err
			}
		}
		got = true
		emit(ctx, obs, Update{Status: resp.GetStatus()})
	}
	if cause := context.Cause(sctx); ctx.Err() == nil && cause != nil {
		return got, cause
	}
	return got, err
}
