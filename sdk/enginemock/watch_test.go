package enginemock

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

var insecureCreds = grpc.WithTransportCredentials(insecure.NewCredentials())

// registerHealth is a Register serving grpc.health.v1 in mode from hs (a
// fresh one when nil), as vLLM's and older SGLang's mocks do.
func registerHealth(mode WatchMode, hs *health.Server) func(*grpc.Server) error {
	if hs == nil {
		hs = health.NewServer()
	}
	return func(s *grpc.Server) error {
		h, err := HealthServer(mode, hs)
		if err != nil {
			return err
		}
		healthpb.RegisterHealthServer(s, h)
		return nil
	}
}

// healthEngine serves an engine with one signal "" on grpc.health.v1 in mode.
func healthEngine(t *testing.T, mode WatchMode) (*Engine, healthpb.HealthClient) {
	t.Helper()
	hs := health.NewServer()
	e := newEngine(t, Config{
		Signals:  []string{""},
		Register: registerHealth(mode, hs),
		Publish: func(c Change) {
			for _, sig := range c.Changed {
				hs.SetServingStatus(sig, c.Health[sig])
			}
		},
	})
	conn, _ := serve(t, e)
	return e, healthpb.NewHealthClient(conn)
}

func TestWatchModes(t *testing.T) {
	t.Parallel()
	// Each mode's Watch of "" on a serving engine whose "" then fails: the
	// statuses received, then how the stream ends (codes.OK: io.EOF) unless
	// it stays open.
	tests := map[WatchMode]struct {
		want []healthpb.HealthCheckResponse_ServingStatus
		end  codes.Code
		open bool
	}{
		WatchNormal:        {want: []healthpb.HealthCheckResponse_ServingStatus{serving, notServing}, open: true},
		WatchOnce:          {want: []healthpb.HealthCheckResponse_ServingStatus{serving}, end: codes.OK},
		WatchUnimplemented: {end: codes.Unimplemented},
		WatchSilent:        {end: codes.OK},
	}
	for mode, tt := range tests {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e, client := healthEngine(t, mode)
			if resp, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != serving {
				t.Fatalf("Check = %v, %v; want SERVING", resp, err)
			}
			w, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				if i == 1 {
					must(t, e, "/health", `{"status": "NOT_SERVING"}`)
				}
				resp, err := w.Recv()
				if err != nil || resp.GetStatus() != want {
					t.Fatalf("Recv %d = %v, %v; want %v", i, resp, err, want)
				}
			}
			if tt.open {
				return
			}
			_, err = w.Recv()
			if tt.end == codes.OK && !errors.Is(err, io.EOF) || tt.end != codes.OK && status.Code(err) != tt.end {
				t.Errorf("end of stream = %v, want code %v", err, tt.end)
			}
		})
	}
}

func TestWatchOnceUnknownService(t *testing.T) {
	t.Parallel()
	_, client := healthEngine(t, WatchOnce)
	w, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := w.Recv(); err != nil || resp.GetStatus() != unknownSvc {
		t.Errorf("Watch(nope) = %v, %v; want SERVICE_UNKNOWN", resp, err)
	}
}

func TestParseWatchMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]WatchMode{"": WatchNormal, "normal": WatchNormal, "once": WatchOnce, "unimplemented": WatchUnimplemented, "silent": WatchSilent} {
		if got, err := ParseWatchMode(in); got != want || err != nil {
			t.Errorf("ParseWatchMode(%q) = %q, %v; want %q, nil", in, got, err, want)
		}
	}
	if _, err := ParseWatchMode("loud"); err == nil {
		t.Error("ParseWatchMode(loud) = nil error, want one")
	}
}

// TestRegisterError: Serve reports what Register failed with, and closes
// the listener.
func TestRegisterError(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{Register: registerHealth("loud", nil)})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serve(lis); err == nil {
		t.Error("Serve with WatchMode loud = nil, want an error")
	}
	if _, err := lis.Accept(); err == nil {
		t.Error("listener still open after Serve failed")
	}
}

// serve serves e on loopback until the test ends and returns a client
// connection and Serve's result.
func serve(t *testing.T, e *Engine) (*grpc.ClientConn, <-chan error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), insecureCreds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, served
}

// TestStopGrace: Stop cuts off an RPC that never ends after its bound, and
// Serve returns nil.
func TestStopGrace(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{Signals: []string{""}, Register: registerHealth(WatchNormal, nil)})
	conn, served := serve(t, e)
	w, err := healthpb.NewHealthClient(conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	e.Stop()
	if took := time.Since(begin); took < stopGrace || took > stopGrace+5*time.Second {
		t.Errorf("Stop took %v with a Watch open, want about %v", took, stopGrace)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v, want nil", err)
	}
}
