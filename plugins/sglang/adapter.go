package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Name is the engine name vigil selects this adapter by (--engine sglang).
const Name = "sglang"

// Version is the adapter's version.
const Version = "0.1.0"

// engine names SGLang in reasons and errors.
const engine = "SGLang"

// OptionAPI is the engine option (--engine-option api=...) that picks the
// API: "auto" (the default: the current one when SglangService answers,
// else the older one), "runtime" (sglang.runtime.v1) or "scheduler" (older
// servers' grpc.health.v1 only).
const OptionAPI = "api"

// The APIs OptionAPI names.
const (
	apiAuto      = "auto"
	apiRuntime   = "runtime"
	apiScheduler = "scheduler"
)

// SchedulerService is the health service name of older SGLang servers,
// their readiness.
const SchedulerService = "sglang.grpc.scheduler.SglangScheduler"

// Adapter implements sdk.Engine and sdk.Generator for SGLang, on the
// adapterkit. Create it with New.
type Adapter struct {
	*adapterkit.Adapter

	mu       sync.Mutex
	api      string // apiRuntime or apiScheduler, once Signals has run
	layout   string // layoutReleased or layoutNew, once Signals has run on the current API
	instance uint64 // the lifetime id Start read, on the current API
}

var (
	_ sdk.Engine    = (*Adapter)(nil)
	_ sdk.Generator = (*Adapter)(nil)
)

// New returns an SGLang adapter; opts are the kit's.
func New(opts ...adapterkit.Option) *Adapter {
	a := &Adapter{}
	a.Adapter = adapterkit.New(adapterkit.Spec{
		Info: sdk.AdapterInfo{
			Name:         Name,
			Version:      Version,
			Capabilities: sdk.Capabilities{Readiness: true, Generate: true, Abort: true, Embed: true},
		},
		Engine:  engine,
		Options: []string{OptionAPI, OptionLayout},
		CheckOptions: func(options map[string]string) error {
			if err := checkAPI(options[OptionAPI]); err != nil {
				return err
			}
			return checkLayout(options[OptionLayout], options[OptionAPI])
		},
		Signals:    a.signals,
		ReadWorker: a.readWorker,
		LifetimeID: func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
			snap, err := firstSnapshot(ctx, conn, a.currentLayout())
			return strconv.FormatUint(snap.instance, 10), err
		},
	}, opts...)
	return a
}

// currentLayout is the layout Signals picked.
func (a *Adapter) currentLayout() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.layout
}

// signals picks the API and its layout, asking the engine when the options
// leave them to detection, and returns its health signals.
func (a *Adapter) signals(ctx context.Context, conn *grpc.ClientConn, options map[string]string) ([]adapterkit.Signal, error) {
	api, err := pickAPI(ctx, conn, options[OptionAPI])
	if err != nil {
		return nil, err
	}
	layout := ""
	if api == apiRuntime {
		if layout, err = pickLayout(ctx, conn, options[OptionLayout]); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	a.api, a.layout = api, layout
	a.mu.Unlock()
	if api == apiScheduler {
		return []adapterkit.Signal{
			// Lost, not a drain: NOT_SERVING also stands for a silent
			// scheduler, and upstream's Python server ends its generations
			// before its grace period anyway.
			adapterkit.HealthService(conn, "", adapterkit.Liveness),
			adapterkit.HealthService(conn, SchedulerService, adapterkit.Readiness),
		}, nil
	}
	client := sglangpb.NewSglangServiceClient(conn)
	return []adapterkit.Signal{
		{
			Name: "HealthCheck",
			Role: adapterkit.Liveness,
			Check: func(ctx context.Context) error {
				resp, err := client.HealthCheck(ctx, &sglangpb.HealthCheckRequest{}, grpc.WaitForReady(true))
				if err == nil && !resp.GetHealthy() {
					err = errors.New("healthy is false")
				}
				return err
			},
		},
		{
			Name:  "engine state",
			Role:  adapterkit.Liveness,
			Check: func(ctx context.Context) error { return checkSnapshot(ctx, conn, layout) },
			Watch: func(ctx context.Context, policy sdk.HealthPolicy) <-chan sdk.Event {
				return a.watchState(ctx, conn, policy)
			},
		},
		drainSignal(conn),
	}, nil
}

// drainSignal is the runtime's grpc.health.v1 service, polled (its Watch
// is UNIMPLEMENTED): NOT_SERVING once the server stops, which then lets
// open calls finish (Tonic's graceful shutdown), so a drain. A runtime
// without the service serves as far as this signal goes.
func drainSignal(conn *grpc.ClientConn) adapterkit.Signal {
	sig := adapterkit.DrainingHealthService(conn, sglangpb.SglangService_ServiceDesc.ServiceName)
	check := sig.Check
	sig.Check = func(ctx context.Context) error {
		err := check(ctx)
		switch status.Code(err) {
		case codes.Unimplemented, codes.NotFound:
			return nil
		}
		return err
	}
	sig.Watch = nil
	return sig
}

// checkAPI refuses a value of OptionAPI that names no API.
func checkAPI(option string) error {
	switch option {
	case "", apiAuto, apiRuntime, apiScheduler:
		return nil
	}
	return &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("%s=%q: want %s, %s or %s", OptionAPI, option, apiAuto, apiRuntime, apiScheduler)}
}

// pickAPI returns the API option names, or the one the engine answers.
func pickAPI(ctx context.Context, conn *grpc.ClientConn, option string) (string, error) {
	if err := checkAPI(option); err != nil {
		return "", err
	}
	if option == apiRuntime || option == apiScheduler {
		return option, nil
	}
	_, err := sglangpb.NewSglangServiceClient(conn).HealthCheck(ctx, &sglangpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
		return apiRuntime, nil
	case codes.Unimplemented:
		return apiScheduler, nil
	}
	return "", fmt.Errorf("finding out which SGLang API the engine serves: %w", err)
}

// firstSnapshot reads the engine's state now: the first message of
// WatchEngineState, in layout.
func firstSnapshot(ctx context.Context, conn *grpc.ClientConn, layout string) (snapshot, error) {
	raw, err := firstRawSnapshot(ctx, conn)
	if err != nil {
		return snapshot{}, err
	}
	return decodeSnapshot(raw, layout)
}

// checkSnapshot is the state signal's Check: healthy, up and not paused
// serves.
func checkSnapshot(ctx context.Context, conn *grpc.ClientConn, layout string) error {
	snap, err := firstSnapshot(ctx, conn, layout)
	if err != nil {
		return err
	}
	if ev := availability(snap, layout); ev.Availability != sdk.Serving {
		return fmt.Errorf("%w: %s", adapterkit.ErrNotServing, ev.Reason)
	}
	return nil
}

// availability maps one snapshot, whatever its lifetime id. The new layout
// has no server_status: healthy stands for UP.
func availability(s snapshot, layout string) sdk.Event {
	if layout == layoutNew {
		switch {
		case !s.healthy:
			return sdk.Event{Availability: sdk.Lost, Reason: "engine state healthy false"}
		case s.paused:
			return sdk.Event{Availability: sdk.NotReady, Reason: "generation paused"}
		}
		return sdk.Event{Availability: sdk.Serving, Reason: "engine state healthy"}
	}
	switch {
	case s.status == sglangpb.ServerStatus_UNHEALTHY, !s.healthy:
		return sdk.Event{Availability: sdk.Lost, Reason: fmt.Sprintf("engine state %s, healthy %v", s.status, s.healthy)}
	case s.status != sglangpb.ServerStatus_UP:
		return sdk.Event{Availability: sdk.NotReady, Reason: fmt.Sprintf("engine state %s", s.status)}
	case s.paused:
		return sdk.Event{Availability: sdk.NotReady, Reason: "generation paused"}
	}
	return sdk.Event{Availability: sdk.Serving, Reason: "engine state UP"}
}

// watchState follows WatchEngineState: each snapshot's availability, and
// Lost for another lifetime id or the end of the stream. A stream that
// ends UNAVAILABLE after a snapshot (a recycled connection: GOAWAY, then
// the connection closed) is reopened, and its first snapshot, due within
// policy.Timeout, is judged as any other.
func (a *Adapter) watchState(ctx context.Context, conn *grpc.ClientConn, policy sdk.HealthPolicy) <-chan sdk.Event {
	a.mu.Lock()
	want := watched{instance: a.instance, layout: a.layout}
	a.mu.Unlock()
	policy = policy.WithDefaults()
	out := make(chan sdk.Event)
	go func() {
		defer close(out)
		send := func(ev sdk.Event) bool {
			ev.Time = time.Now()
			select {
			case out <- ev:
				return ev.Availability != sdk.Lost
			case <-ctx.Done():
				return false
			}
		}
		got, ok, err := followState(ctx, conn, want, send, 0)
		for ok && got && status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			var rerr error
			if got, ok, rerr = followState(ctx, conn, want, send, policy.Timeout); !got {
				err = fmt.Errorf("%w; reopening it: %v", err, rerr)
			} else {
				err = rerr
			}
		}
		if ok && ctx.Err() == nil {
			send(sdk.Event{Availability: sdk.Lost, Reason: fmt.Sprintf("engine state stream ended: %v", err)})
		}
	}()
	return out
}

// watched is what the state watch holds snapshots to: the lifetime id
// Start read, and the layout they come in.
type watched struct {
	instance uint64
	layout   string
}

// followState opens one WatchEngineState stream and sends each snapshot's
// event until the stream ends (its error) or a send ends the watch (ok
// false); got tells whether any snapshot came. With first above 0 the
// first snapshot must come within first.
func followState(ctx context.Context, conn *grpc.ClientConn, want watched, send func(sdk.Event) bool, first time.Duration) (got, ok bool, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var timer *time.Timer
	if first > 0 {
		timer = time.AfterFunc(first, func() { cancel(fmt.Errorf("no snapshot within %s", first)) })
		defer timer.Stop()
	}
	stream, err := openState(sctx, conn)
	for err == nil {
		var raw []byte
		if raw, err = stream.recv(); err != nil {
			break
		}
		if !got && timer != nil && !timer.Stop() {
			break
		}
		got = true
		snap, derr := decodeSnapshot(raw, want.layout)
		ev := availability(snap, want.layout)
		switch {
		case derr != nil:
			ev = sdk.Event{Availability: sdk.Lost, Reason: derr.Error()}
		case snap.instance != want.instance:
			ev = sdk.Event{Availability: sdk.Lost, Reason: fmt.Sprintf("engine replaced: instance id %d, was %d", snap.instance, want.instance)}
		}
		if !send(ev) {
			return got, false, nil
		}
	}
	if cause := context.Cause(sctx); ctx.Err() == nil && cause != nil {
		err = cause
	}
	return got, true, err
}

// readWorker reads the engine's own account of itself: the lifetime id
// from the state stream, the rest from the JSON of GetServerInfo and
// GetModelInfo. Older servers report nothing.
func (a *Adapter) readWorker(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
	a.mu.Lock()
	api, layout := a.api, a.layout
	a.mu.Unlock()
	if api == apiScheduler {
		// A stated empty set: no request reaches this engine through vigil.
		return sdk.Worker{Accepts: "none"}, nil
	}
	snap, err := firstSnapshot(ctx, conn, layout)
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("reading the engine state: %w", err)
	}
	client := sglangpb.NewSglangServiceClient(conn)
	server, err := client.GetServerInfo(ctx, &sglangpb.GetServerInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("GetServerInfo: %w", err)
	}
	model, err := client.GetModelInfo(ctx, &sglangpb.GetModelInfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("GetModelInfo: %w", err)
	}
	w, err := worker(server.GetJsonInfo(), model)
	if err != nil {
		return sdk.Worker{}, err
	}
	w.InstanceID = strconv.FormatUint(snap.instance, 10)
	w.Accepts = strings.Join(accepts(layout), ",")
	if embed, err := isEmbedding(model.GetJsonInfo()); err != nil {
		return sdk.Worker{}, err
	} else if embed {
		// An embedding model generates nothing: it takes Embed only.
		w.Accepts = sdk.CapEmbed
	}
	a.mu.Lock()
	a.instance = snap.instance
	a.mu.Unlock()
	return w, nil
}

// worker reads the keys vigil uses from the two JSON objects; a missing key
// or a null is not an error, a value of another type is.
func worker(serverJSON string, model *sglangpb.GetModelInfoResponse) (sdk.Worker, error) {
	var server struct {
		ServedModelName *string `json:"served_model_name"`
		ModelPath       *string `json:"model_path"`
		ContextLength   *uint32 `json:"context_length"`
		Version         *string `json:"version"`
	}
	if err := json.Unmarshal([]byte(orEmpty(serverJSON)), &server); err != nil {
		return sdk.Worker{}, fmt.Errorf("GetServerInfo json_info: %w", err)
	}
	var info struct {
		ModelPath *string `json:"model_path"`
	}
	if err := json.Unmarshal([]byte(orEmpty(model.GetJsonInfo())), &info); err != nil {
		return sdk.Worker{}, fmt.Errorf("GetModelInfo json_info: %w", err)
	}
	w := sdk.Worker{ModelID: first(model.GetModelPath(), deref(info.ModelPath), deref(server.ModelPath)), EngineVersion: deref(server.Version)}
	w.ServedModelName = first(deref(server.ServedModelName), w.ModelID)
	if server.ContextLength != nil {
		w.MaxModelLen = *server.ContextLength
	}
	return w, nil
}

func orEmpty(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// first returns the first non-empty string.
func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
