package adapter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Name is the engine name vigil selects this adapter by (--engine vllm).
const Name = "vllm"

// Version is the adapter's version.
const Version = "0.1.0"

// Health service names served by vLLM.
const (
	serviceServer    = ""
	serviceControl   = "vllm.Control"
	serviceInference = "vllm.Inference"
)

// infoTimeout bounds the GetServerInfo and GetModelInfo calls after the
// engine serves.
const infoTimeout = 10 * time.Second

// Adapter implements sdk.Engine for vLLM. The zero value is not usable;
// call New.
type Adapter struct {
	clock healthwatch.Clock

	mu      sync.Mutex
	started bool
	conn    *grpc.ClientConn
	health  sdk.HealthPolicy
}

var _ sdk.Engine = (*Adapter)(nil)

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock of the startup wait; tests use a fake one.
func WithClock(c healthwatch.Clock) Option { return func(a *Adapter) { a.clock = c } }

// New returns a vLLM adapter.
func New(opts ...Option) *Adapter {
	a := &Adapter{clock: healthwatch.SystemClock{}}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Info describes the adapter.
func (a *Adapter) Info(context.Context) (sdk.AdapterInfo, error) {
	return sdk.AdapterInfo{
		Name:         Name,
		Version:      Version,
		Capabilities: sdk.Capabilities{Readiness: true, Generate: true, Abort: true},
	}, nil
}

// Start waits until vLLM reports SERVING for both vllm.Control and
// vllm.Inference, then reads its server and model information.
func (a *Adapter) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	if err := validate(req); err != nil {
		return sdk.Worker{}, err
	}
	policy := req.Health.WithDefaults()
	deadline := req.StartupDeadline
	if deadline == 0 {
		deadline = sdk.DefaultStartupDeadline
	}

	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return sdk.Worker{}, fmt.Errorf("%w: vLLM adapter", sdk.ErrAlreadyStarted)
	}
	conn, err := grpc.NewClient(req.EngineAddr, append(sdk.StreamDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		healthwatch.ConnectParams(policy.RetryMax),
	)...)
	if err != nil {
		a.mu.Unlock()
		return sdk.Worker{}, fmt.Errorf("%w: engine address %q: %v", sdk.ErrInvalidArgument, req.EngineAddr, err)
	}
	a.started, a.conn, a.health = true, conn, policy
	a.mu.Unlock()

	worker, err := a.waitAndRead(ctx, conn, req.EngineAddr, deadline, policy)
	if err != nil {
		// Leave the adapter as it was, so the caller may Start again.
		a.mu.Lock()
		a.started, a.conn = false, nil
		a.mu.Unlock()
		conn.Close()
	}
	return worker, err
}

func (a *Adapter) waitAndRead(ctx context.Context, conn *grpc.ClientConn, addr string, deadline time.Duration, policy sdk.HealthPolicy) (sdk.Worker, error) {
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	err := healthwatch.WaitServing(wctx, healthwatch.ReadyChecker(conn), []string{serviceControl, serviceInference}, healthwatch.WaitOptions{
		AttemptTimeout: policy.Timeout,
		Backoff:        healthwatch.DefaultBackoff(policy.RetryMax),
		Clock:          a.clock,
	})
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return sdk.Worker{}, fmt.Errorf("%w: vLLM engine at %s did not serve within %s: %v", sdk.ErrStartupDeadline, addr, deadline, err)
		}
		return sdk.Worker{}, fmt.Errorf("waiting for vLLM engine at %s: %w", addr, err)
	}
	return readWorker(ctx, conn)
}

func validate(req sdk.StartRequest) error {
	if _, _, err := net.SplitHostPort(req.EngineAddr); err != nil {
		return fmt.Errorf("%w: engine-addr %q: want host:port: %v", sdk.ErrInvalidArgument, req.EngineAddr, err)
	}
	if req.StartupDeadline < 0 {
		return fmt.Errorf("%w: startup-deadline %s: must be a positive duration", sdk.ErrInvalidArgument, req.StartupDeadline)
	}
	if err := req.Health.Validate(); err != nil {
		return err
	}
	if len(req.Options) > 0 {
		keys := make([]string, 0, len(req.Options))
		for k := range req.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Errorf("%w: engine option %q: the vLLM adapter takes no options", sdk.ErrInvalidArgument, strings.Join(keys, ", "))
	}
	return nil
}

func readWorker(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	control := vllmpb.NewControlClient(conn)
	// The engine's own status codes stay out of the error chain: a timeout
	// here is an unavailable engine, not the startup deadline.
	server, err := control.GetServerInfo(ctx, &vllmpb.GetServerInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("%w: reading vLLM server info: %v", sdk.ErrUnavailable, err)
	}
	model, err := control.GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("%w: reading vLLM model info: %v", sdk.ErrUnavailable, err)
	}
	return sdk.Worker{
		ModelID:           model.GetModelId(),
		ServedModelName:   model.GetServedModelName(),
		EngineVersion:     server.GetEngineVersion(),
		InstanceID:        server.GetInstanceId(),
		MaxModelLen:       server.GetMaxModelLen(),
		KVBlockSize:       server.GetKvBlockSize(),
		SupportsTextInput: model.GetSupportsTextInput(),
	}, nil
}

// connection returns the engine connection, nil before Start.
func (a *Adapter) connection() *grpc.ClientConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

// WatchAvailability follows "" for liveness and "vllm.Inference" for
// readiness. The first event is Serving: Start has just seen both serve.
func (a *Adapter) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	a.mu.Lock()
	conn, policy := a.conn, a.health
	a.mu.Unlock()
	if conn == nil {
		return nil, fmt.Errorf("%w: WatchAvailability before Start", sdk.ErrNotStarted)
	}
	opts := healthwatch.Options{Interval: policy.Interval, Timeout: policy.Timeout, Failures: policy.Failures}
	// The watches end with the merge, which ends after Lost: nothing keeps
	// checking an engine that is gone.
	wctx, cancel := context.WithCancel(ctx)
	live := healthwatch.Watch(wctx, conn, serviceServer, opts)
	ready := healthwatch.Watch(wctx, conn, serviceInference, opts)
	out := make(chan sdk.Event)
	go func() {
		defer cancel()
		merge(wctx, live, ready, out)
	}()
	return out, nil
}

// merge turns the two health watches into availability events, sending only
// changes, and ends after Lost.
func merge(ctx context.Context, live, ready <-chan healthwatch.Update, out chan<- sdk.Event) {
	defer close(out)
	state := sdk.AvailabilityUnknown
	send := func(a sdk.Availability, reason string) bool {
		if a == state {
			return true
		}
		state = a
		select {
		case out <- sdk.Event{Availability: a, Reason: reason, Time: time.Now()}:
			return a != sdk.Lost
		case <-ctx.Done():
			return false
		}
	}
	if !send(sdk.Serving, "vLLM engine serving") {
		return
	}
	readyStatus := healthpb.HealthCheckResponse_SERVING
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-live:
			if !ok {
				return
			}
			switch {
			case u.Err != nil:
				send(sdk.Lost, fmt.Sprintf("vLLM engine lost: %v", u.Err))
				return
			case u.Status != healthpb.HealthCheckResponse_SERVING:
				send(sdk.Lost, fmt.Sprintf("vLLM engine lost: health status %s", u.Status))
				return
			}
		case u, ok := <-ready:
			if !ok {
				return
			}
			if u.Err != nil {
				send(sdk.Lost, fmt.Sprintf("vLLM engine lost: %v", u.Err))
				return
			}
			readyStatus = u.Status
		}
		if readyStatus == healthpb.HealthCheckResponse_SERVING {
			send(sdk.Serving, "vLLM engine serving")
		} else {
			send(sdk.NotReady, fmt.Sprintf("vLLM engine not ready: %s health status %s", serviceInference, readyStatus))
		}
	}
}

// Shutdown closes the engine connection; the engine keeps running.
func (a *Adapter) Shutdown(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		err := a.conn.Close()
		a.conn = nil
		if err != nil {
			return fmt.Errorf("closing vLLM connection: %w", err)
		}
	}
	return nil
}
