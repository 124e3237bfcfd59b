// Package toy is a vigil engine adapter for the toy engine, built on the
// sdk's adapterkit: the kit checks Start's request, dials the engine, waits
// for it and watches it; this package says what the engine's health signals
// are, reads what it reports about itself, and maps requests onto its API.
package toy

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/examples/adapter/toypb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// Name is the engine name vigil selects this adapter by (--engine toy).
const Name = "toy"

// Version is the adapter's version, as Info reports it.
const Version = "0.1.0"

// OptionMaxTokens is the one engine option (--engine-option max-tokens=N):
// the most tokens of a request that sets none. Default 0, the whole prompt.
const OptionMaxTokens = "max-tokens"

// engine names the toy engine in reasons and errors.
const engine = "Toy"

// Adapter implements sdk.Engine and sdk.Generator for the toy engine.
// Create it with New.
type Adapter struct {
	*adapterkit.Adapter

	mu        sync.Mutex
	maxTokens uint32 // OptionMaxTokens, set by a successful Start
}

var (
	_ sdk.Engine    = (*Adapter)(nil)
	_ sdk.Generator = (*Adapter)(nil)
)

// New returns a toy adapter; opts are the kit's.
func New(opts ...adapterkit.Option) *Adapter {
	a := &Adapter{}
	a.Adapter = adapterkit.New(adapterkit.Spec{
		Info: sdk.AdapterInfo{
			Name:    Name,
			Version: Version,
			// Each capability claimed is implemented: NotReady from the
			// readiness signal, and Generate and Abort below.
			Capabilities: sdk.Capabilities{Readiness: true, Generate: true, Abort: true},
		},
		Engine:  engine,
		Options: []string{OptionMaxTokens},
		// The kit checks the values once every key is known: an unknown
		// key, the likelier typo, is reported first.
		CheckOptions: func(options map[string]string) error {
			_, err := parseMaxTokens(options)
			return err
		},
		Signals:    signals,
		ReadWorker: readWorker,
		LifetimeID: lifetimeID,
	}, opts...)
	return a
}

// Start starts the kit's Adapter, which rejects a malformed address, an
// unknown option key and (with CheckOptions) a bad value itself, and keeps
// the options' values.
func (a *Adapter) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	w, err := a.Adapter.Start(ctx, req)
	if err != nil {
		return sdk.Worker{}, err
	}
	maxTokens, _ := parseMaxTokens(req.Options) // checked by CheckOptions
	a.mu.Lock()
	a.maxTokens = maxTokens
	a.mu.Unlock()
	return w, nil
}

// parseMaxTokens reads OptionMaxTokens; a bad value is an *sdk.FieldError
// naming the key, which vigil reports against its --engine-option flag.
func parseMaxTokens(options map[string]string) (uint32, error) {
	v, ok := options[OptionMaxTokens]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("%s=%q: want a number of tokens, 0 or more", OptionMaxTokens, v)}
	}
	return uint32(n), nil
}

// signals: the engine's grpc.health.v1 "" is its liveness (not serving is
// Lost), its service's name its readiness (not serving is NotReady).
func signals(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
	return []adapterkit.Signal{
		adapterkit.HealthService(conn, "", adapterkit.Liveness),
		adapterkit.HealthService(conn, toypb.EngineService_ServiceDesc.ServiceName, adapterkit.Readiness),
	}, nil
}

func readWorker(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
	info, err := toypb.NewEngineServiceClient(conn).Info(ctx, &toypb.InfoRequest{})
	if err != nil {
		return sdk.Worker{}, fmt.Errorf("EngineService.Info: %w", err)
	}
	return sdk.Worker{
		ModelID:           info.GetModel(),
		ServedModelName:   info.GetModel(),
		EngineVersion:     info.GetVersion(),
		InstanceID:        info.GetInstanceId(),
		SupportsTextInput: true,
	}, nil
}

// lifetimeID reads the instance id again after a reconnect: another one is
// a restarted engine, which the kit reports Lost.
func lifetimeID(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	info, err := toypb.NewEngineServiceClient(conn).Info(ctx, &toypb.InfoRequest{})
	return info.GetInstanceId(), err
}
