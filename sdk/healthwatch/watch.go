package healthwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
)

// Update is one observation of a service's health: a status, or (last of
// all) the error that ended the watch.
type Update struct {
	Status healthpb.HealthCheckResponse_ServingStatus
	// Err, when set, ends the watch: the Watch stream failed, or
	// policy.Failures Checks in a row failed. The channel is closed after it.
	Err error
	// Time is when the observation was made.
	Time time.Time
}

// Watch follows service on conn and sends its status whenever it changes,
// starting with the first status it learns. It closes the channel after an
// Update with Err, or when ctx ends.
//
// It combines three sources: the Watch stream (changes at once); one Check
// when the stream ends cleanly or answers UNIMPLEMENTED, after which Checks
// alone follow the service; and Checks polled as [Poll] does (at once, then
// every policy.Interval, each under policy.Timeout), which catch a server
// that stops answering while its connection stays open: with the default
// policy it is given up within Interval + Failures*Timeout = 2.5 s (with a
// Busy, one unanswered PING of Timeout/4 more: see WatchBusy). While the
// stream is live, Checks prove liveness only and their statuses are not
// reported, so a late Check answer cannot undo a change the stream
// reported.
func Watch(ctx context.Context, conn grpc.ClientConnInterface, service string, policy sdk.HealthPolicy) <-chan Update {
	return WatchBusy(ctx, conn, service, policy, nil)
}

// WatchBusy is Watch whose Checks are polled with [PollBusy] and busy: a
// Check that times out on a busy engine is not a failure. A nil busy is
// Watch.
func WatchBusy(ctx context.Context, conn grpc.ClientConnInterface, service string, policy sdk.HealthPolicy, busy *Busy) <-chan Update {
	return WatchWith(ctx, conn, service, policy, WatchOptions{Busy: busy})
}

// WatchOptions are the optional parts of [WatchWith].
type WatchOptions struct {
	// Busy judges the Checks that time out, as [WatchBusy] does. Nil:
	// none.
	Busy *Busy
	// Reopened, if set, confirms that a Watch stream reopened after a
	// recycled connection reaches the process watched before (an adapter
	// compares the engine's lifetime id): it is called, under
	// policy.Timeout, when the reopened stream delivers its first status,
	// and no status of that stream is reported before it returns. An
	// error ends the watch with it, and the held statuses are dropped:
	// they were a replacement's. The first stream, and a stream once
	// confirmed, are never held.
	Reopened func(ctx context.Context) error
}

// WatchWith is Watch with opts.
func WatchWith(ctx context.Context, conn grpc.ClientConnInterface, service string, policy sdk.HealthPolicy, opts WatchOptions) <-chan Update {
	w := &watcher{
		busy:     opts.Busy,
		reopened: opts.Reopened,
		client:   healthpb.NewHealthClient(conn),
		check:    Checker(conn),
		service:  service,
		policy:   policy.WithDefaults(),
		out:      make(chan Update),
	}
	// Streaming from the start: a probe answer must not race the stream's
	// first status.
	w.streaming.Store(true)
	go w.run(ctx)
	return w.out
}

type watcher struct {
	client  healthpb.HealthClient
	check   CheckFunc
	service string
	policy  sdk.HealthPolicy
	busy    *Busy
	// reopened confirms a reopened stream's process (WatchOptions).
	reopened func(context.Context) error
	out      chan Update
	// streaming is true while the Watch stream delivers statuses. Checks
	// then only prove liveness: a Check answer read before a change but
	// delivered after the stream's report of it would undo the change.
	streaming atomic.Bool
}

func (w *watcher) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	obs := make(chan Update)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.stream(ctx, obs) }()
	go func() { defer wg.Done(); w.probe(ctx, obs) }()
	defer func() {
		cancel()
		wg.Wait()
		close(w.out)
	}()

	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-obs:
			if u.Err == nil && u.Status == last {
				continue
			}
			last = u.Status
			select {
			case w.out <- u:
			case <-ctx.Done():
				return
			}
			if u.Err != nil {
				return
			}
		}
	}
}

// emit hands an observation to run unless ctx has ended.
func emit(ctx context.Context, obs chan<- Update, u Update) {
	u.Time = time.Now()
	select {
	case obs <- u:
	case <-ctx.Done():
	}
}

func (w *watcher) stream(ctx context.Context, obs chan<- Update) {
	err := w.followRecycled(ctx, obs)
	w.streaming.Store(false)
	switch {
	case ctx.Err() != nil:
	case status.Code(err) == codes.Unimplemented, errors.Is(err, io.EOF):
		// Some servers answer Watch UNIMPLEMENTED, or end it after one
		// status, or after none. One Check at once tells a server that is
		// going away from one that merely does not stream; if it still
		// serves, Checks follow it from here on.
		st, cerr := w.confirm(ctx)
		if cerr == errBusy {
			return // the probe's Checks follow the service from here
		}
		if cerr != nil {
			emit(ctx, obs, Update{Err: fmt.Errorf("health watch of %q stopped streaming and the confirming check failed: %w", w.service, cerr)})
			return
		}
		emit(ctx, obs, Update{Status: st})
	default:
		emit(ctx, obs, Update{Err: fmt.Errorf("health watch of %q failed: %w", w.service, err)})
	}
}

// errBusy is confirm's error for a Check that timed out on a busy engine.
var errBusy = errors.New("busy")

// confirm is the one Check after the stream's end, under policy.Timeout;
// one that times out on a busy engine (Busy.Judge) is errBusy.
func (w *watcher) confirm(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, w.policy.Timeout)
	defer cancel()
	st, err := w.check(cctx, w.service)
	if err != nil && (errors.Is(cctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) && w.busy != nil {
		if w.busy.Judge(ctx, err) == nil {
			return st, errBusy
		}
	}
	return st, err
}

// probe polls Check: failures end the watch, and while the stream is not
// live the answers are the statuses.
func (w *watcher) probe(ctx context.Context, obs chan<- Update) {
	err := PollBusy(ctx, w.policy, func(ctx context.Context) error {
		st, err := w.check(ctx, w.service)
		if err == nil && !w.streaming.Load() {
			emit(ctx, obs, Update{Status: st})
		}
		return err
	}, w.busy)
	if err != nil {
		emit(ctx, obs, Update{Err: fmt.Errorf("health checks of %q: %w", w.service, err)})
	}
}
