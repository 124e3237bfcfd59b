package healthwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/sdk"
)

// Poll calls check at once and then every policy.Interval, each call under
// policy.Timeout, until ctx ends (Poll returns nil) or policy.Failures calls
// in a row have failed (Poll returns an error wrapping the last failure).
// Zero policy fields take the sdk defaults.
//
// After a failure the next call starts at once, so a server that stops
// answering is given up within Interval + Failures*Timeout of its last
// answer; an answer within Timeout, however slow, is never a failure. It is
// the liveness half of [Watch], and on its own follows engines whose only
// health signal is a unary RPC.
func Poll(ctx context.Context, policy sdk.HealthPolicy, check func(context.Context) error) error {
	return PollBusy(ctx, policy, check, nil)
}

// PollBusy is Poll with busy judging every check that times out
// (Busy.Judge): one it judges busy is not a failure, and the next call
// comes after policy.Interval. The next answered check of this poll ends
// the busy episode (Busy.Answered); another poll's answers, a signal that
// stays fast while this one is slow, do not. A nil busy is Poll.
func PollBusy(ctx context.Context, policy sdk.HealthPolicy, check func(context.Context) error, busy *Busy) error {
	policy = policy.WithDefaults()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	slow := false // a check of this poll timed out since its last answer
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		cctx, cancel := context.WithTimeout(ctx, policy.Timeout)
		err := check(cctx)
		// The server may end the call at the deadline it was sent a moment
		// before ours passes.
		timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			if slow {
				busy.Answered()
				slow = false
			}
			failures = 0
			timer.Reset(policy.Interval)
			continue
		}
		if timedOut {
			slow = true
			if err = busy.Judge(ctx, err); err == nil {
				timer.Reset(policy.Interval)
				continue
			}
		}
		if failures++; failures >= policy.Failures {
			return fmt.Errorf("%d checks failed in a row, last: %w", failures, err)
		}
		timer.Reset(0)
	}
}
