package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// refEngine is a minimal adapter for an engine that serves only the
// standard health service: the smallest thing that follows the contract.
// broken, when set, makes it break the rules named in brokenRules.
type refEngine struct {
	broken bool

	mu      sync.Mutex
	started bool
	conn    *grpc.ClientConn
	health  sdk.HealthPolicy
}

var _ sdk.Engine = (*refEngine)(nil)

func (e *refEngine) Info(context.Context) (sdk.AdapterInfo, error) {
	if e.broken {
		return sdk.AdapterInfo{Name: "wrong"}, nil
	}
	return sdk.AdapterInfo{Name: "ref", Version: "0.0.1"}, nil
}

func (e *refEngine) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	if _, _, err := net.SplitHostPort(req.EngineAddr); err != nil && !e.broken {
		return sdk.Worker{}, &sdk.FieldError{Field: sdk.FieldEngineAddr, Problem: fmt.Sprintf("%q: %v", req.EngineAddr, err)}
	}
	policy := req.Health.WithDefaults()
	e.mu.Lock()
	if e.started && !e.broken {
		e.mu.Unlock()
		return sdk.Worker{}, fmt.Errorf("%w: ref adapter", sdk.ErrAlreadyStarted)
	}
	conn, err := grpc.NewClient(req.EngineAddr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		healthwatch.ConnectParams(policy.RetryMax))
	if err != nil {
		e.mu.Unlock()
		return sdk.Worker{}, fmt.Errorf("engine address %q: %v", req.EngineAddr, err)
	}
	if e.conn != nil {
		e.conn.Close()
	}
	e.started, e.conn, e.health = true, conn, policy
	e.mu.Unlock()

	deadline := req.StartupDeadline
	if deadline == 0 {
		deadline = sdk.DefaultStartupDeadline
	}
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	err = healthwatch.WaitServing(wctx, healthwatch.Checker(conn), []string{""}, healthwatch.WaitOptions{
		AttemptTimeout: policy.Timeout,
		Backoff:        healthwatch.DefaultBackoff(policy.RetryMax),
	})
	switch {
	case err == nil:
		return sdk.Worker{ServedModelName: "ref-model"}, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !e.broken:
		return sdk.Worker{}, fmt.Errorf("%w: engine at %s did not serve within %s: %v", sdk.ErrStartupDeadline, req.EngineAddr, deadline, err)
	}
	return sdk.Worker{}, fmt.Errorf("waiting for engine at %s: %w", req.EngineAddr, err)
}

func (e *refEngine) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	e.mu.Lock()
	conn, policy := e.conn, e.health
	e.mu.Unlock()
	if conn == nil {
		return nil, fmt.Errorf("%w: WatchAvailability before Start", sdk.ErrNotStarted)
	}
	ctx, cancel := context.WithCancel(ctx)
	updates := healthwatch.Watch(ctx, conn, "", policy)
	out := make(chan sdk.Event)
	go func() {
		defer close(out)
		defer cancel()
		send := func(a sdk.Availability, reason string) bool {
			select {
			case out <- sdk.Event{Availability: a, Reason: reason}:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !send(sdk.Serving, "engine serving") {
			return
		}
		for u := range updates {
			if (u.Err != nil || u.Status != healthpb.HealthCheckResponse_SERVING) && e.broken {
				return // closes without saying Lost
			}
			switch {
			case u.Err != nil:
				send(sdk.Lost, fmt.Sprintf("engine lost: %v", u.Err))
				return
			case u.Status != healthpb.HealthCheckResponse_SERVING:
				send(sdk.Lost, fmt.Sprintf("engine lost: health status %s", u.Status))
				return
			}
		}
	}()
	return out, nil
}

func (e *refEngine) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == nil {
		if e.broken && e.started {
			return errors.New("already shut down")
		}
		return nil
	}
	err := e.conn.Close()
	e.conn = nil
	return err
}

// servingHealth starts a gRPC server with grpc-go's health service on
// loopback; stop stops it, as an engine that exits.
func servingHealth(t *testing.T) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthgrpc.RegisterHealthServer(srv, health.NewServer())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis.Addr().String(), srv.Stop
}

func TestEngineReference(t *testing.T) {
	sdktest.TestEngine(t, sdktest.Harness{
		New:     func() sdk.Engine { return &refEngine{} },
		Serving: servingHealth,
		Name:    "ref",
	})
}

// brokenRules are the messages TestEngine must report for the broken
// reference engine: one per rule it breaks.
var brokenRules = []string{
	`Info() Name = "wrong", want "ref"`,
	`Info() Version = "", want a version`,
	`Start(EngineAddr: "no-port") error = waiting for engine at no-port`,
	`second Start(`,
	`want an error wrapping sdk.ErrStartupDeadline`,
	`channel closed without a Lost event after stop`,
	`second Shutdown() = already shut down, want nil`,
}

// TestEngineReportsViolations runs TestEngine on the broken engine in a
// child process (this test binary again, as go-plugin's tests do) and checks
// that it fails and names every broken rule.
func TestEngineReportsViolations(t *testing.T) {
	if os.Getenv("SDKTEST_BROKEN_ENGINE") == "1" {
		sdktest.TestEngine(t, sdktest.Harness{
			New:     func() sdk.Engine { return &refEngine{broken: true} },
			Serving: servingHealth,
			Name:    "ref",
		})
		return
	}
	if testing.Short() {
		t.Skip("runs TestEngine in a child process")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestEngineReportsViolations$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SDKTEST_BROKEN_ENGINE=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("TestEngine on a broken engine: exit %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range brokenRules {
		if !strings.Contains(string(out), want) {
			t.Errorf("TestEngine output lacks %q; output:\n%s", want, out)
		}
	}
	for _, mode := range []string{"/direct", "/plugin"} {
		if !strings.Contains(string(out), "--- FAIL: TestEngineReportsViolations/Info"+mode) {
			t.Errorf("TestEngine output has no failed Info%s subtest; output:\n%s", mode, out)
		}
	}
}
