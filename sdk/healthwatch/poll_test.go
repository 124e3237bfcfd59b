package healthwatch_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

var errCheck = errors.New("engine says unhealthy")

// TestPoll: the story of a unary health RPC as Poll follows it.
func TestPoll(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: time.Millisecond, Timeout: time.Second, Failures: 3}
	tests := map[string]struct {
		answers []error // answer of call i; calls past the end fail
		want    int     // calls made when Poll returns
	}{
		// A failure in a row shorter than Failures is forgiven.
		"failures below the count are forgiven": {answers: []error{nil, errCheck, errCheck, nil, errCheck, errCheck}, want: 7},
		"failures from the first call":          {answers: nil, want: 3},
		"the count resets after a success":      {answers: []error{errCheck, errCheck, nil}, want: 6},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var calls int
			err := healthwatch.Poll(t.Context(), policy, func(context.Context) error {
				calls++
				if calls <= len(tt.answers) {
					return tt.answers[calls-1]
				}
				return errCheck
			})
			if !errors.Is(err, errCheck) || !strings.Contains(err.Error(), "3 checks failed in a row") {
				t.Errorf("Poll() = %v, want 3 checks failed in a row wrapping %v", err, errCheck)
			}
			if calls != tt.want {
				t.Errorf("Poll made %d calls, want %d", calls, tt.want)
			}
		})
	}
}

// TestPollTimeout: a call that does not answer within Timeout fails, and
// one that answers slowly within it does not.
func TestPollTimeout(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: time.Millisecond, Timeout: 50 * time.Millisecond, Failures: 2}
	var calls atomic.Int32
	err := healthwatch.Poll(t.Context(), policy, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			// Slow but within Timeout: not a failure. The slowness is what
			// is under test, not a synchronisation.
			time.Sleep(policy.Timeout / 5)
			return nil
		}
		<-ctx.Done() // frozen from the second call on
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll() = %v, want DeadlineExceeded after two frozen calls", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("Poll made %d calls, want 3 (one slow success, two timeouts)", n)
	}
}

// TestPollCancel: ending ctx ends Poll with nil, even mid-call.
func TestPollCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- healthwatch.Poll(ctx, sdk.HealthPolicy{Timeout: time.Hour}, func(ctx context.Context) error {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	receive(t, entered, "the first call")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Poll() after cancel = %v, want nil", err)
		}
	case <-time.After(within):
		t.Fatalf("Poll still running %v after cancel", within)
	}
}
