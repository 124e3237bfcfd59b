package adapterkit_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// toy is an adapter for an engine whose only API is grpc.health.v1: "" is
// its liveness, "toy.Inference" its readiness. A real adapter adds its
// engine's calls to ReadWorker and LifetimeID, and sdk.Generator with
// adapterkit.Relay; its main function calls sdk.Serve(newToy()).
type toy struct {
	*adapterkit.Adapter
}

func newToy() *toy {
	return &toy{adapterkit.New(adapterkit.Spec{
		Info:   sdk.AdapterInfo{Name: "toy", Version: "0.1.0", Capabilities: sdk.Capabilities{Readiness: true}},
		Engine: "Toy",
		Signals: func(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
			return []adapterkit.Signal{
				adapterkit.HealthService(conn, "", adapterkit.Liveness),
				adapterkit.HealthService(conn, "toy.Inference", adapterkit.Readiness),
			}, nil
		},
		ReadWorker: func(context.Context, *grpc.ClientConn) (sdk.Worker, error) {
			return sdk.Worker{ModelID: "toy-model", ServedModelName: "toy-model"}, nil
		},
	})}
}

func Example() {
	// A stand-in engine: grpc-go's health server on loopback.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("toy.Inference", healthgrpc.HealthCheckResponse_SERVING)
	healthgrpc.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx := context.Background()
	a := newToy()
	defer a.Shutdown(ctx)
	worker, err := a.Start(ctx, sdk.StartRequest{EngineAddr: lis.Addr().String()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("worker:", worker.ServedModelName)

	events, _ := a.WatchAvailability(ctx)
	fmt.Println((<-events).Reason)
	hs.SetServingStatus("toy.Inference", healthgrpc.HealthCheckResponse_NOT_SERVING)
	fmt.Println((<-events).Reason)
	hs.SetServingStatus("", healthgrpc.HealthCheckResponse_NOT_SERVING)
	fmt.Println((<-events).Reason)
	// Output:
	// worker: toy-model
	// Toy engine serving
	// Toy engine not ready: health of "toy.Inference" is NOT_SERVING
	// Toy engine lost: health of "" is NOT_SERVING
}

// An engine that turns "" NOT_SERVING when it stops and then finishes the
// requests it has, as vLLM does, drains on purpose: Draining while the
// connection holds, and the watch goes on.
func ExampleDrainingHealthService() {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthgrpc.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx := context.Background()
	a := adapterkit.New(adapterkit.Spec{
		Info:   sdk.AdapterInfo{Name: "toy", Version: "0.1.0"},
		Engine: "Toy",
		Signals: func(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
			return []adapterkit.Signal{adapterkit.DrainingHealthService(conn, "")}, nil
		},
		ReadWorker: func(context.Context, *grpc.ClientConn) (sdk.Worker, error) {
			return sdk.Worker{ServedModelName: "toy-model"}, nil
		},
	})
	defer a.Shutdown(ctx)
	if _, err := a.Start(ctx, sdk.StartRequest{EngineAddr: lis.Addr().String()}); err != nil {
		fmt.Println(err)
		return
	}
	watch, cancel := context.WithCancel(ctx)
	defer cancel() // the watch goes on after Draining
	events, _ := a.WatchAvailability(watch)
	fmt.Println((<-events).Availability)
	hs.SetServingStatus("", healthgrpc.HealthCheckResponse_NOT_SERVING)
	ev := <-events
	fmt.Println(ev.Availability, ev.Reason)
	// Output:
	// SERVING
	// DRAINING Toy engine draining: health of "" is NOT_SERVING
}

// A host running the adapter in process checks a configuration's engine
// options without an engine, as Start would.
func ExampleAdapter_CheckOptions() {
	a := newToy()
	fmt.Println(a.CheckOptions(map[string]string{"tp": "2"}))
	fmt.Println(a.CheckOptions(nil))
	// Output:
	// invalid argument: StartRequest.Options "tp": unknown key; this adapter takes no engine options
	// <nil>
}
