package enginemock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// SetCheckLatency makes every health check answer d late (0: at once), as
// an engine busy with a long prefill answers: the handler is held, the
// process and its HTTP/2 transport are not (PINGs are answered at once).
// It applies to grpc.health.v1 Check through [BusyChecks] and to the
// engines' own health RPCs through [Engine.CheckDelay]; Watch streams are
// unaffected.
func (e *Engine) SetCheckLatency(d time.Duration) { e.checkLatency.Store(int64(d)) }

// CheckDelay waits the latency SetCheckLatency set, or until ctx ends
// (its error then), for a mock's health RPC to call first.
func (e *Engine) CheckDelay(ctx context.Context) error {
	d := time.Duration(e.checkLatency.Load())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// postCheckLatency is POST /check-latency {"latency": "2s"}.
func (e *Engine) postCheckLatency(r *http.Request) error {
	var body struct {
		Latency *string `json:"latency"`
	}
	if err := Decode(r, &body); err != nil {
		return err
	}
	if body.Latency == nil {
		return errors.New("latency: required, a duration such as 2s (0 answers at once)")
	}
	d, err := time.ParseDuration(*body.Latency)
	if err != nil || d < 0 {
		return fmt.Errorf("latency: %q: want a duration such as 2s, 0 or more", *body.Latency)
	}
	e.SetCheckLatency(d)
	return nil
}

// BusyChecks returns hs with Check calling delay first, and failing with
// its error: a mock passes its Engine.CheckDelay, resolved per call, since
// Config.Register runs before New returns the Engine.
func BusyChecks(delay func(context.Context) error, hs healthpb.HealthServer) healthpb.HealthServer {
	return busyChecks{hs, delay}
}

type busyChecks struct {
	healthpb.HealthServer
	delay func(context.Context) error
}

func (b busyChecks) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := b.delay(ctx); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return b.HealthServer.Check(ctx, req)
}
