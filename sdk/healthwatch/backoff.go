package healthwatch

import (
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

// Backoff computes retry delays: Base * Factor^retries, capped at Max, with
// up to Jitter (a fraction) taken off at random so that many workers do not
// retry in step. A delay never exceeds Max.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Factor float64
	Jitter float64
}

// DefaultBackoff returns the startup retry backoff with the given cap:
// 10ms doubling, 20% jitter.
func DefaultBackoff(max time.Duration) Backoff {
	return Backoff{Base: 10 * time.Millisecond, Max: max, Factor: 2, Jitter: 0.2}
}

// Delay returns the delay before retry number retries (0 for the first).
func (b Backoff) Delay(retries int) time.Duration {
	d := float64(b.Base)
	// One Pow rather than a loop of retries multiplications: with Factor <= 1
	// the delay never reaches Max and a loop would run retries times.
	if retries > 0 && d > 0 && d < float64(b.Max) {
		d *= math.Pow(b.Factor, float64(retries))
	}
	if d > float64(b.Max) {
		d = float64(b.Max)
	}
	if b.Jitter > 0 {
		d -= d * b.Jitter * rand.Float64()
	}
	return time.Duration(d)
}

// ConnectParams returns a dial option that caps gRPC's reconnect backoff at
// max. gRPC's default grows to 120 s, so after a long outage a client would
// otherwise notice a restarted engine up to two minutes late, whatever its
// own retry loop does.
func ConnectParams(max time.Duration) grpc.DialOption {
	cfg := grpcbackoff.DefaultConfig
	cfg.BaseDelay = 10 * time.Millisecond
	cfg.MaxDelay = max
	// No jitter: each client reconnects to its own engine, so there is no
	// herd to spread, and jitter would stretch the cap by a fifth.
	cfg.Jitter = 0
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           cfg,
		MinConnectTimeout: time.Second,
	})
}

// Clock is the time source of WaitServing; tests substitute a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
