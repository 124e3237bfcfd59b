//go:build linux

package adapterkit_test

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

// serveReusePort serves an engine with lifetime id on addr with
// SO_REUSEPORT, as Python gRPC servers listen; "" serves status st.
func serveReusePort(t *testing.T, addr, id string, st healthpb.HealthCheckResponse_ServingStatus) *engine {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	lis, err := lc.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{Server: health.NewServer(), id: id, addr: lis.Addr().String(), srv: grpc.NewServer(), reads: make(chan struct{}, 100)}
	e.SetServingStatus("", st)
	e.SetServingStatus(inference, st)
	healthpb.RegisterHealthServer(e.srv, e)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = e.srv.Serve(lis)
	}()
	t.Cleanup(func() {
		e.srv.Stop()
		<-served
	})
	return e
}

// TestTwoEnginesOnOnePort: an old engine process still listening NOT_SERVING
// beside its replacement on one port (SO_REUSEPORT) holds whichever
// connection reaches it. Start opens a new connection at most every
// ProbeInterval while the engine answers without serving, so it reaches
// the one that serves long before the startup deadline, takes it, and
// logs which instance it took and which did not serve.
func TestTwoEnginesOnOnePort(t *testing.T) {
	t.Parallel()
	for range 3 { // the kernel's pick is random: a few runs, each must find "new"
		old := serveReusePort(t, "127.0.0.1:0", "old", notServing)
		logs := make(chan string, 100)
		log := hclog.New(&hclog.LoggerOptions{Output: lineWriter(logs), JSONFormat: true})
		a := adapterkit.New(spec(true), adapterkit.WithLogger(log))
		type result struct {
			w   sdk.Worker
			err error
		}
		done := make(chan result, 1)
		go func() {
			w, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: old.addr, StartupDeadline: within, Health: policy})
			done <- result{w, err}
		}()
		// Start's first connection reaches the old process, the only one.
		receive(t, old.reads, "a Check of the old engine")
		serveReusePort(t, old.addr, "new", serving)
		r := <-done
		w, err := r.w, r.err
		if err != nil {
			t.Fatalf("Start() = %v, want the engine that serves found within %v", err, within)
		}
		a.Shutdown(context.Background())
		if w.InstanceID != "new" {
			t.Fatalf("worker instance id %q, want %q", w.InstanceID, "new")
		}
		close(logs)
		took := false
		for line := range logs {
			if strings.Contains(line, "took the one that serves") {
				if !strings.Contains(line, `"instance_id":"new"`) || !strings.Contains(line, `"not_serving_instance_ids":["old"]`) {
					t.Errorf("log %s, want it to name instance new as taken and old as not serving", line)
				}
				took = true
			}
		}
		if !took {
			t.Error("no log entry naming the instance taken")
		}
	}
}

// lineWriter hands each write (one log entry) to a channel, dropping
// entries when it is full.
type lineWriter chan string

func (l lineWriter) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}
