package healthwatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// fakeClock is a healthwatch.Clock whose time moves only when WaitServing
// waits: After(d) advances it by d and returns a channel that has already
// fired, so an hour of backoff passes in milliseconds.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	maxDelay time.Duration // longest After seen
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.maxDelay = max(c.maxDelay, d)
	fired := make(chan time.Time, 1)
	fired <- c.now
	return fired
}

var errRefused = status.Error(codes.Unavailable, "connection refused")

// TestWaitServingAfterLongOutage is the reason for the capped backoff: an
// engine that comes up after an hour down is found within the cap, not after
// a backoff that has grown with the outage.
func TestWaitServingAfterLongOutage(t *testing.T) {
	t.Parallel()
	const retryMax = 250 * time.Millisecond
	clock := newFakeClock()
	up := clock.Now().Add(time.Hour)
	check := func(_ context.Context, _ string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		if clock.Now().Before(up) {
			return healthpb.HealthCheckResponse_UNKNOWN, errRefused
		}
		return healthpb.HealthCheckResponse_SERVING, nil
	}
	attempts := 0
	err := healthwatch.WaitServing(t.Context(), check, []string{"vllm.Control", "vllm.Inference"}, healthwatch.WaitOptions{
		Backoff:   healthwatch.DefaultBackoff(retryMax),
		Clock:     clock,
		OnAttempt: func(int, error) { attempts++ },
	})
	if err != nil {
		t.Fatalf("WaitServing() = %v, want nil", err)
	}
	if lag := clock.Now().Sub(up); lag < 0 || lag > retryMax {
		t.Errorf("WaitServing returned %v after the engine came up, want within [0, %v]", lag, retryMax)
	}
	if clock.maxDelay > retryMax {
		t.Errorf("longest backoff = %v, want at most %v", clock.maxDelay, retryMax)
	}
	t.Logf("%d failed attempts over the hour", attempts)
}

// TestWaitServingDefaults: with zero options the defaults apply. Through an
// hour of waiting the retry interval stays capped at sdk.DefaultRetryMax,
// which is short enough for a worker back within 100 ms of its engine (B2),
// and attempts never come faster than the cap less its jitter: waiting is
// no busy loop.
func TestWaitServingDefaults(t *testing.T) {
	t.Parallel()
	const b2Budget = 60 * time.Millisecond // of B2's 100 ms, what finding the engine may take
	clock := newFakeClock()
	start := clock.Now()
	up := start.Add(time.Hour)
	var lastMinute []time.Time // attempt times in the hour's last minute
	check := func(_ context.Context, _ string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		now := clock.Now()
		if now.Before(up) {
			if now.After(up.Add(-time.Minute)) {
				lastMinute = append(lastMinute, now)
			}
			return healthpb.HealthCheckResponse_UNKNOWN, errRefused
		}
		return healthpb.HealthCheckResponse_SERVING, nil
	}
	if err := healthwatch.WaitServing(t.Context(), check, []string{""}, healthwatch.WaitOptions{Clock: clock}); err != nil {
		t.Fatalf("WaitServing() = %v, want nil", err)
	}
	if clock.maxDelay > sdk.DefaultRetryMax || clock.maxDelay > b2Budget {
		t.Errorf("longest backoff = %v, want at most the default %v and at most %v", clock.maxDelay, sdk.DefaultRetryMax, b2Budget)
	}
	if lag := clock.Now().Sub(up); lag < 0 || lag > sdk.DefaultRetryMax {
		t.Errorf("WaitServing returned %v after the engine came up, want within [0, %v]", lag, sdk.DefaultRetryMax)
	}
	minGap := time.Duration(float64(sdk.DefaultRetryMax) * 0.8) // the cap less its 20% jitter
	for i := 1; i < len(lastMinute); i++ {
		if gap := lastMinute[i].Sub(lastMinute[i-1]); gap < minGap {
			t.Fatalf("attempts %v apart after %v of waiting, want at least %v", gap, lastMinute[i].Sub(start), minGap)
		}
	}
	if max := int(time.Minute / minGap); len(lastMinute) == 0 || len(lastMinute) > max {
		t.Errorf("%d attempts in the hour's last minute, want 1 to %d", len(lastMinute), max)
	}
}

func TestWaitServingCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	check := func(context.Context, string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		return healthpb.HealthCheckResponse_UNKNOWN, errRefused
	}
	err := healthwatch.WaitServing(ctx, check, []string{""}, healthwatch.WaitOptions{
		Clock: newFakeClock(),
		OnAttempt: func(retry int, _ error) {
			if retry == 3 {
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitServing() = %v, want an error wrapping context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("WaitServing() = %q, want it to name the last failure %q", err, "connection refused")
	}
}

// TestWaitServingStatuses: anything but SERVING keeps WaitServing waiting,
// and only a round in which every service answers SERVING ends it.
func TestWaitServingStatuses(t *testing.T) {
	t.Parallel()
	const (
		serving    = healthpb.HealthCheckResponse_SERVING
		notServing = healthpb.HealthCheckResponse_NOT_SERVING
	)
	// A round is one pass over the services; status gives each service's
	// answer in a round, counted from 1.
	tests := map[string]struct {
		status func(round int, service string) healthpb.HealthCheckResponse_ServingStatus
		// wantRound is the round WaitServing returns nil after; 0 means
		// it must keep waiting until cancelled after cancelAt rounds.
		wantRound int
	}{
		"all serving at once": {
			status:    func(int, string) healthpb.HealthCheckResponse_ServingStatus { return serving },
			wantRound: 1,
		},
		"NOT_SERVING keeps it waiting": {
			status: func(round int, svc string) healthpb.HealthCheckResponse_ServingStatus {
				if svc == "b" && round < 5 {
					return notServing
				}
				return serving
			},
			wantRound: 5,
		},
		"NOT_SERVING for ever": {
			status: func(_ int, svc string) healthpb.HealthCheckResponse_ServingStatus {
				if svc == "a" {
					return notServing
				}
				return serving
			},
		},
		"SERVICE_UNKNOWN and UNKNOWN are not serving": {
			status: func(round int, svc string) healthpb.HealthCheckResponse_ServingStatus {
				switch {
				case round < 3 && svc == "a":
					return healthpb.HealthCheckResponse_SERVICE_UNKNOWN
				case round < 4 && svc == "b":
					return healthpb.HealthCheckResponse_UNKNOWN
				}
				return serving
			},
			wantRound: 4,
		},
		// Each service serves in every other round, never both in one: a
		// waiter that remembered earlier rounds would wrongly return.
		"never all in one round": {
			status: func(round int, svc string) healthpb.HealthCheckResponse_ServingStatus {
				if (svc == "a") == (round%2 == 1) {
					return serving
				}
				return notServing
			},
		},
	}
	const cancelAt = 20
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			round := 0
			check := func(_ context.Context, svc string) (healthpb.HealthCheckResponse_ServingStatus, error) {
				if svc == "a" { // the first service: a new round
					round++
				}
				return tt.status(round, svc), nil
			}
			var failed []string
			err := healthwatch.WaitServing(ctx, check, []string{"a", "b"}, healthwatch.WaitOptions{
				Clock: newFakeClock(),
				OnAttempt: func(retry int, err error) {
					failed = append(failed, err.Error())
					if retry+1 == cancelAt {
						cancel()
					}
				},
			})
			if tt.wantRound == 0 {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("WaitServing() = %v after %d rounds, want it still waiting until cancelled", err, round)
				}
				return
			}
			if err != nil {
				t.Fatalf("WaitServing() = %v, want nil", err)
			}
			if round != tt.wantRound {
				t.Errorf("WaitServing returned after round %d, want round %d", round, tt.wantRound)
			}
			if len(failed) != tt.wantRound-1 {
				t.Errorf("OnAttempt called %d times (%q), want %d", len(failed), failed, tt.wantRound-1)
			}
			for _, msg := range failed {
				if !strings.Contains(msg, "health check of") {
					t.Errorf("OnAttempt error %q, want it to name the service checked", msg)
				}
			}
		})
	}
}

// TestWaitServingAttemptTimeout: a Check that does not answer is cut off
// after AttemptTimeout and retried.
func TestWaitServingAttemptTimeout(t *testing.T) {
	t.Parallel()
	calls := 0
	check := func(ctx context.Context, _ string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		calls++
		if calls == 1 {
			<-ctx.Done() // a server that accepts the call and never answers
			return healthpb.HealthCheckResponse_UNKNOWN, status.FromContextError(ctx.Err()).Err()
		}
		return healthpb.HealthCheckResponse_SERVING, nil
	}
	var first error
	err := healthwatch.WaitServing(t.Context(), check, []string{""}, healthwatch.WaitOptions{
		AttemptTimeout: 10 * time.Millisecond,
		Clock:          newFakeClock(),
		OnAttempt:      func(_ int, err error) { first = err },
	})
	if err != nil {
		t.Fatalf("WaitServing() = %v, want nil", err)
	}
	if status.Code(errors.Unwrap(first)) != codes.DeadlineExceeded {
		t.Errorf("first attempt failed with %v, want code DeadlineExceeded", first)
	}
	if calls != 2 {
		t.Errorf("Check called %d times, want 2", calls)
	}
}

// TestWaitServingReal waits on a real health server: NOT_SERVING until the
// first failed attempt, then SERVING.
func TestWaitServingReal(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus("a", healthpb.HealthCheckResponse_NOT_SERVING)
	_, conn := serve(t, hs)
	var failed []error
	err := healthwatch.WaitServing(t.Context(), healthwatch.Checker(conn), []string{"", "a"}, healthwatch.WaitOptions{
		OnAttempt: func(_ int, err error) {
			failed = append(failed, err)
			hs.SetServingStatus("a", healthpb.HealthCheckResponse_SERVING)
		},
	})
	if err != nil {
		t.Fatalf("WaitServing() = %v, want nil", err)
	}
	if want := fmt.Sprintf("health check of %q: NOT_SERVING", "a"); len(failed) != 1 || failed[0].Error() != want {
		t.Errorf("failed attempts = %v, want one: %q", failed, want)
	}
}

// TestCheckerRefused: Checker fails fast on a refused connection rather
// than waiting for the server to appear.
func TestCheckerRefused(t *testing.T) {
	t.Parallel()
	conn := dial(t, closedAddr(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := healthwatch.Checker(conn)(ctx, "")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Check() = %v, %v, want code Unavailable at once", st, err)
	}
}
