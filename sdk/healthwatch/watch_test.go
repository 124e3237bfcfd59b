package healthwatch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

const (
	serving    = healthpb.HealthCheckResponse_SERVING
	notServing = healthpb.HealthCheckResponse_NOT_SERVING
	svc        = "vllm.Inference"
)

// noPolling makes the periodic Check too rare to matter, so a test sees
// only what the Watch stream and its confirming Check deliver.
var noPolling = sdk.HealthPolicy{Interval: time.Hour, Timeout: 5 * time.Second, Failures: 2}

// polling checks often, with a generous timeout.
var polling = sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: 5 * time.Second, Failures: 2}

// TestWatchStream: with grpc-go's health server, the stream alone delivers
// the first status and every change.
func TestWatchStream(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus(svc, serving)
	_, conn := serve(t, hs)
	updates, _ := watch(t, conn, svc, noPolling)

	nextStatus(t, updates, serving)
	hs.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
	hs.SetServingStatus(svc, serving)
	nextStatus(t, updates, serving)
}

// TestWatchStreamEndsServing: Watch sends one status and ends with OK while
// Check still says SERVING. The watch goes on, and later changes arrive by
// polling Check.
func TestWatchStreamEndsServing(t *testing.T) {
	t.Parallel()
	h := newOnceWatch(nil)
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, polling)

	nextStatus(t, updates, serving)
	receive(t, h.watchEnded, "the end of the Watch stream")
	receive(t, h.checksAfter, "a Check after the Watch stream ended")
	h.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
	// The confirming Check after the stream's end happens once, so this
	// change can only have come from polling.
	h.SetServingStatus(svc, serving)
	nextStatus(t, updates, serving)
}

// TestWatchStreamEndsNotServing: the server changes to NOT_SERVING and ends
// the Watch stream with OK, as a server going away might; the confirming
// Check reports NOT_SERVING.
func TestWatchStreamEndsNotServing(t *testing.T) {
	t.Parallel()
	end := make(chan struct{})
	h := newOnceWatch(end)
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, noPolling)

	nextStatus(t, updates, serving)
	h.SetServingStatus(svc, notServing)
	close(end)
	nextStatus(t, updates, notServing)
}

// TestWatchStreamSilent: Watch ends with OK before sending any status; the
// confirming Check gives the first one.
func TestWatchStreamSilent(t *testing.T) {
	t.Parallel()
	h := silentWatch{health.NewServer()}
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, noPolling)

	nextStatus(t, updates, serving)
}

// TestWatchUnimplemented: Watch answers UNIMPLEMENTED; polling Check
// follows the service instead.
func TestWatchUnimplemented(t *testing.T) {
	t.Parallel()
	h := failingWatch{health.NewServer(), codes.Unimplemented}
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, polling)

	nextStatus(t, updates, serving)
	h.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
	h.SetServingStatus(svc, serving)
	nextStatus(t, updates, serving)
}

// TestWatchStreamFails: any other error from Watch ends the watch with it.
func TestWatchStreamFails(t *testing.T) {
	t.Parallel()
	h := failingWatch{health.NewServer(), codes.PermissionDenied}
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, noPolling)

	u := next(t, updates)
	if status.Code(u.Err) != codes.PermissionDenied {
		t.Fatalf("update = {Status: %v, Err: %v}, want an Err with code PermissionDenied", u.Status, u.Err)
	}
	closed(t, updates)
}

// TestWatchFrozen: a server that accepts calls and answers none from the
// start is found after Failures*Timeout: the first Check starts at once,
// each failed Check takes Timeout, and the next starts at once.
func TestWatchFrozen(t *testing.T) {
	t.Parallel()
	opts := sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: 100 * time.Millisecond, Failures: 2}
	bound := time.Duration(opts.Failures) * opts.Timeout
	_, conn := serve(t, frozenHealth{})
	start := time.Now()
	updates, _ := watch(t, conn, svc, opts)

	u := next(t, updates)
	took := time.Since(start)
	if u.Err == nil {
		t.Fatalf("update = {Status: %v}, want an Err for a frozen server", u.Status)
	}
	if status.Code(u.Err) != codes.DeadlineExceeded {
		t.Errorf("Err = %v, want code DeadlineExceeded", u.Err)
	}
	// Timers never fire early, so the lower bound is exact; the upper one
	// leaves room for a loaded machine.
	if slack := 2 * time.Second; took < bound || took > bound+slack {
		t.Errorf("frozen server found after %v, want within [%v, %v]", took, bound, bound+slack)
	}
	t.Logf("frozen server found after %v (Failures*Timeout = %v)", took, bound)
	closed(t, updates)
}

// TestWatchSlowCheck: a Check that answers late, but within Timeout, is not
// a failure, even with Failures 1.
func TestWatchSlowCheck(t *testing.T) {
	t.Parallel()
	opts := sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: 5 * time.Second, Failures: 1}
	h := &slowCheck{Server: health.NewServer(), delay: 15 * opts.Interval, answered: make(chan struct{}, 100)}
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, opts)

	nextStatus(t, updates, serving)
	// Had the slow answer counted as a failure, the watch would have ended
	// and no second Check would come.
	for i := range 2 {
		select {
		case <-h.answered:
		case u := <-updates:
			t.Fatalf("update {Status: %v, Err: %v} while waiting for Check %d, want none", u.Status, u.Err, i+1)
		case <-time.After(within):
			t.Fatalf("Check %d not answered within %v", i+1, within)
		}
	}
	h.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
}

// TestWatchServerStopped: a server that goes away ends the watch with an
// error.
func TestWatchServerStopped(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus(svc, serving)
	srv, conn := serve(t, hs)
	updates, _ := watch(t, conn, svc, polling)

	nextStatus(t, updates, serving)
	srv.Stop()
	if u := next(t, updates); u.Err == nil {
		t.Fatalf("update = {Status: %v}, want an Err after the server stopped", u.Status)
	}
	closed(t, updates)
}

// TestWatchCancel: ending ctx closes the channel without an error update.
func TestWatchCancel(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus(svc, serving)
	_, conn := serve(t, hs)

	t.Run("while watching", func(t *testing.T) {
		updates, cancel := watch(t, conn, svc, polling)
		nextStatus(t, updates, serving)
		cancel()
		drainNoErr(t, updates)
	})
	t.Run("before Watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		drainNoErr(t, healthwatch.Watch(ctx, conn, svc, polling))
	})
}

// drainNoErr reads updates until the channel closes, failing on any Err.
func drainNoErr(t *testing.T, updates <-chan healthwatch.Update) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				return
			}
			if u.Err != nil {
				t.Errorf("update Err = %v after cancel, want the channel closed without one", u.Err)
			}
		case <-timeout:
			t.Fatalf("watch channel still open %v after cancel", within)
		}
	}
}

// staleCheck reads the status when its first Check arrives but answers only
// when released, so the answer can be older than a change the Watch stream
// has already delivered.
type staleCheck struct {
	*health.Server
	calls    atomic.Int32
	entered  chan struct{}
	release  chan struct{}
	answered chan struct{}
}

func (h *staleCheck) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if h.calls.Add(1) == 1 {
		close(h.entered)
		<-h.release
	}
	select {
	case h.answered <- struct{}{}:
	default:
	}
	return resp, err
}

// TestWatchStaleCheckDoesNotUndoStream: while the stream is live, a Check
// answer read before a change cannot report the old status after it.
func TestWatchStaleCheckDoesNotUndoStream(t *testing.T) {
	t.Parallel()
	opts := sdk.HealthPolicy{Interval: 10 * time.Millisecond, Timeout: 5 * time.Second, Failures: 1}
	h := &staleCheck{Server: health.NewServer(), entered: make(chan struct{}), release: make(chan struct{}), answered: make(chan struct{}, 100)}
	h.SetServingStatus(svc, serving)
	_, conn := serve(t, h)
	updates, _ := watch(t, conn, svc, opts)

	nextStatus(t, updates, serving)
	receive(t, h.entered, "the first Check")
	h.SetServingStatus(svc, notServing)
	nextStatus(t, updates, notServing)
	close(h.release) // the Check now answers SERVING, read before the change
	receive(t, h.answered, "the stale answer")
	receive(t, h.answered, "a later Check")
	// Updates keep their order: had the stale SERVING been reported, it
	// would come before this one.
	h.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVICE_UNKNOWN)
	nextStatus(t, updates, healthpb.HealthCheckResponse_SERVICE_UNKNOWN)
}
