package command

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestRouteRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"discovery", []string{"--discovery", "zk"}, `--discovery "zk": want file or consul`},
		{"empty registry dir", []string{"--registry-dir", ""}, "--registry-dir: must not be empty"},
		{"service", []string{"--service-name", "a b"}, `--service-name "a b"`},
		{"listen", []string{"--listen", "8480"}, `--listen "8480": want host:port`},
		{"http listen", []string{"--http-listen", "127.0.0.1:99999"}, `--http-listen "127.0.0.1:99999": port must be a number from 0 to 65535`},
		{"same address", []string{"--listen", "127.0.0.1:9000", "--http-listen", "127.0.0.1:9000"}, "must differ from --listen"},
		{"retries", []string{"--retries", "-1"}, "--retries -1: must be 0 or more"},
		{"balance", []string{"--balance", "random"}, `--balance "random": want peak-ewma, least-outstanding or round-robin`},
		{"request timeout", []string{"--request-timeout", "0s"}, "--request-timeout 0s: must be a positive duration"},
		{"max body", []string{"--max-body-bytes", "0"}, "--max-body-bytes 0: must be 1 or more"},
		{"stream heartbeat", []string{"--stream-heartbeat", "-1s"}, "--stream-heartbeat -1s: must be 0 (none) or a positive duration"},
		{"idle timeout", []string{"--idle-timeout", "0s"}, "--idle-timeout 0s: must be a positive duration"},
		{"shutdown delay", []string{"--shutdown-delay", "-5s"}, "--shutdown-delay -5s: must be 0 (none) or a positive duration"},
		{"grace period", []string{"--grace-period", "0s"}, "--grace-period 0s: must be a positive duration"},
		{"empty model", []string{"--model", "m", "--model", ""}, `--model "": must not be empty or blank`},
		{"model with a control character", []string{"--model", "my\tmodel"}, `--model "my\tmodel": must not contain control characters`},
		{"long model", []string{"--model", strings.Repeat("m", 513)}, "513 bytes long, want at most 512"},
		{"log format", []string{"--log-format", "xml"}, `--log-format "xml": want text or json`},
		{"log level", []string{"--log-level", "loud"}, `--log-level "loud"`},
		{"argument", []string{"extra"}, "route takes no arguments"},
		{"unparsable", []string{"--retries", "many"}, "retries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runArgs(t, append([]string{"route", "--registry-dir", t.TempDir()}, tc.args...)...)
			if code != ExitConfig {
				t.Errorf("exit code = %d, want %d; output:\n%s", code, ExitConfig, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not contain %q:\n%s", tc.want, out)
			}
		})
	}
}

// --model is repeatable and comma-separated, from the flag or VIGIL_ROUTE_MODEL.
func TestRouteModelFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"unset", "", nil, nil},
		{"repeated and comma-separated", "", []string{"--model", "a", "--model", "b,c"}, []string{"a", "b", "c"}},
		{"environment", "x,y", nil, []string{"x", "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("VIGIL_ROUTE_MODEL", tc.env)
			}
			cmd := routeCommand()
			var cfg routeConfig
			var parseErr error
			cmd.Action = func(c *cli.Context) error {
				cfg, parseErr = parseRoute(c)
				return nil
			}
			app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
			if err := app.Run(append([]string{"vigil", "route", "--registry-dir", t.TempDir()}, tc.args...)); err != nil || parseErr != nil {
				t.Fatalf("route %v: %v, %v", tc.args, err, parseErr)
			}
			if diff := cmp.Diff(tc.want, cfg.models); diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRouteFlagsFromEnvironment(t *testing.T) {
	t.Setenv("VIGIL_ROUTE_HTTP_LISTEN", "nowhere")
	code, out := runArgs(t, "route", "--registry-dir", t.TempDir())
	if code != ExitConfig || !strings.Contains(out, `--http-listen "nowhere"`) {
		t.Errorf("got exit %d, output:\n%s\nwant exit 78 naming --http-listen", code, out)
	}
}

// notifySource is a Discoverer that closes first once its first set of
// workers has reached the router.
type notifySource struct {
	discovery.Discoverer
	first chan struct{}
}

func (s notifySource) Run(ctx context.Context, update func([]discovery.Registration)) {
	sent := false
	s.Discoverer.Run(ctx, func(eps []discovery.Registration) {
		update(eps)
		if !sent {
			sent = true
			close(s.first)
		}
	})
}

func TestRouteServesAndStopsOnSignal(t *testing.T) {
	dir := t.TempDir()
	w := discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 1, Engine: "vllm", Model: "m"}
	if err := file.New(dir, time.Minute).Register(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	cfg := routeConfig{
		discoveryConfig: discoveryConfig{discovery: "file", registryDir: dir, service: "llm"},
		listen:          "127.0.0.1:0", httpListen: "127.0.0.1:0",
		retries: 2, requestTimeout: time.Minute, maxBodyBytes: 1 << 20,
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: io.Discard})
	src := notifySource{Discoverer: file.NewDiscoverer(dir, "llm", log), first: make(chan struct{})}
	signals := make(chan os.Signal, 2)
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveRoute(t.Context(), cfg, src, log, signals, func(g, h net.Addr) { addrs <- [2]net.Addr{g, h} })
	}()
	a := <-addrs
	<-src.first

	resp, err := http.Get("http://" + a[1].String() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "m" {
		t.Errorf("/v1/models: %+v, %v; want model m from the file registry", models, err)
	}

	cc, err := grpc.NewClient("passthrough:///"+a[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hr, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc health: %v, %v; want SERVING", hr.GetStatus(), err)
	}

	signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Errorf("after SIGTERM: %v, want nil (exit 0)", err)
	}
	if _, err := http.Get("http://" + a[1].String() + "/health"); err == nil {
		t.Errorf("HTTP still accepting after the drain")
	}
}

func TestRouteListenFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cfg := routeConfig{
		discoveryConfig: discoveryConfig{discovery: "file", registryDir: t.TempDir(), service: "llm"},
		listen:          "127.0.0.1:0", httpListen: lis.Addr().String(),
		retries: 2, requestTimeout: time.Minute, maxBodyBytes: 1 << 20,
	}
	err = serveRoute(t.Context(), cfg, file.NewDiscoverer(cfg.registryDir, "llm", nil), hclog.NewNullLogger(), nil, nil)
	ec, ok := err.(*exitError)
	if !ok || ec.code != 1 || !strings.Contains(ec.msg, "--http-listen") {
		t.Errorf("got %v, want exit 1 naming --http-listen", err)
	}
}

// routeEnv parses route's flags and environment as vigil route would.
func routeEnv(t *testing.T, args ...string) routeConfig {
	t.Helper()
	cmd := routeCommand()
	var cfg routeConfig
	var parseErr error
	cmd.Action = func(c *cli.Context) error {
		cfg, parseErr = parseRoute(c)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
	if err := app.Run(append([]string{"vigil", "route", "--registry-dir", t.TempDir()}, args...)); err != nil || parseErr != nil {
		t.Fatalf("route %v: %v, %v", args, err, parseErr)
	}
	return cfg
}

// route reads VIGIL_ROUTE_* only; run's VIGIL_LISTEN (its worker
// endpoint) and the other shared names never reach it, so one environment
// can hold both commands' variables.
func TestRouteEnvironment(t *testing.T) {
	t.Run("own variables", func(t *testing.T) {
		t.Setenv("VIGIL_ROUTE_LISTEN", "127.0.0.1:1")
		t.Setenv("VIGIL_LISTEN", "127.0.0.1:2")
		t.Setenv("VIGIL_ROUTE_MODEL", "a,b")
		cfg := routeEnv(t)
		if cfg.listen != "127.0.0.1:1" || !slices.Equal(cfg.models, []string{"a", "b"}) {
			t.Errorf("listen %q, models %q; want VIGIL_ROUTE_LISTEN's 127.0.0.1:1 and VIGIL_ROUTE_MODEL's a, b", cfg.listen, cfg.models)
		}
	})
	t.Run("shared names unread", func(t *testing.T) {
		t.Setenv("VIGIL_LISTEN", "127.0.0.1:2")
		t.Setenv("VIGIL_MODEL", "a")
		t.Setenv("VIGIL_LOG_LEVEL", "nonsense") // read, it would fail the parse
		cfg := routeEnv(t)
		if cfg.listen != "127.0.0.1:8480" || len(cfg.models) != 0 {
			t.Errorf("listen %q, models %q; want the defaults 127.0.0.1:8480 and none: route reads no VIGIL_* but its own", cfg.listen, cfg.models)
		}
	})
	t.Run("lifecycle", func(t *testing.T) {
		t.Setenv("VIGIL_ROUTE_STREAM_HEARTBEAT", "0s")
		t.Setenv("VIGIL_ROUTE_IDLE_TIMEOUT", "70m")
		t.Setenv("VIGIL_ROUTE_SHUTDOWN_DELAY", "15s")
		t.Setenv("VIGIL_ROUTE_GRACE_PERIOD", "1m")
		t.Setenv("VIGIL_GRACE_PERIOD", "nonsense") // run's: read, it would fail the parse
		want := routeLifecycle{heartbeat: 0, idle: 70 * time.Minute, shutdownDelay: 15 * time.Second, grace: time.Minute}
		if got := routeEnv(t).lifecycle; got != want {
			t.Errorf("lifecycle %+v, want %+v from VIGIL_ROUTE_*", got, want)
		}
	})
	t.Run("lifecycle defaults", func(t *testing.T) {
		want := routeLifecycle{heartbeat: 15 * time.Second, idle: 11 * time.Minute, shutdownDelay: 0, grace: 10 * time.Second}
		if got := routeEnv(t).lifecycle; got != want {
			t.Errorf("lifecycle %+v, want the defaults %+v", got, want)
		}
	})
	t.Run("run keeps VIGIL_LISTEN", func(t *testing.T) {
		t.Setenv("VIGIL_ROUTE_LISTEN", "127.0.0.1:1")
		t.Setenv("VIGIL_LISTEN", "127.0.0.1:8999")
		cfg, err := parseRunArgs(t)
		if err != nil || cfg.listen != "127.0.0.1:8999" {
			t.Errorf("run: listen %q, err %v; want VIGIL_LISTEN's 127.0.0.1:8999", cfg.listen, err)
		}
	})
}

// At SIGTERM with --shutdown-delay, health says not serving at once (gRPC
// NOT_SERVING, /health 503) while both listeners still serve new
// connections; a second signal cuts the delay and the drain (exit 1).
func TestRouteShutdownDelay(t *testing.T) {
	dir := t.TempDir()
	w := discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 1, Engine: "vllm", Model: "m"}
	if err := file.New(dir, time.Minute).Register(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	cfg := routeConfig{
		discoveryConfig: discoveryConfig{discovery: "file", registryDir: dir, service: "llm"},
		listen:          "127.0.0.1:0", httpListen: "127.0.0.1:0",
		retries: 2, requestTimeout: time.Minute, maxBodyBytes: 1 << 20,
		lifecycle: routeLifecycle{shutdownDelay: time.Hour, grace: time.Hour, idle: time.Minute},
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: io.Discard})
	src := notifySource{Discoverer: file.NewDiscoverer(dir, "llm", log), first: make(chan struct{})}
	signals := make(chan os.Signal, 2)
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveRoute(t.Context(), cfg, src, log, signals, func(g, h net.Addr) { addrs <- [2]net.Addr{g, h} })
	}()
	a := <-addrs
	<-src.first
	base := "http://" + a[1].String()
	cc, err := grpc.NewClient("passthrough:///"+a[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	watch, err := healthpb.NewHealthClient(cc).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if hr, err := watch.Recv(); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health before SIGTERM: %v, %v; want SERVING", hr.GetStatus(), err)
	}

	signals <- syscall.SIGTERM
	if hr, err := watch.Recv(); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc health after SIGTERM: %v, %v; want NOT_SERVING at once", hr.GetStatus(), err)
	}
	// Health's change is the event; /health reads the same state.
	if code := getCode(t, base+"/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health during the shutdown delay: %d, want 503", code)
	}
	// A new connection, as a balancer that has not yet seen the change.
	http.DefaultClient.CloseIdleConnections()
	if code := getCode(t, base+"/v1/models"); code != http.StatusOK {
		t.Errorf("/v1/models during the shutdown delay: %d, want 200: the listener serves on", code)
	}

	signals <- syscall.SIGTERM
	if err := <-done; exitCode(err) != ExitFailure {
		t.Errorf("after a second signal during the delay: %v (exit %d), want exit 1 (drain cut)", err, exitCode(err))
	}
}

func getCode(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// --idle-timeout closes an idle HTTP keep-alive connection after it, not
// before (the default, 11 minutes, outlasts load balancers' own).
func TestRouteIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	cfg := routeConfig{
		discoveryConfig: discoveryConfig{discovery: "file", registryDir: t.TempDir(), service: "llm"},
		listen:          "127.0.0.1:0", httpListen: "127.0.0.1:0",
		retries: 2, requestTimeout: time.Minute, maxBodyBytes: 1 << 20,
		lifecycle: routeLifecycle{idle: idle, grace: time.Second},
	}
	signals := make(chan os.Signal, 1)
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveRoute(t.Context(), cfg, file.NewDiscoverer(cfg.registryDir, "llm", nil), hclog.NewNullLogger(), signals,
			func(g, h net.Addr) { addrs <- [2]net.Addr{g, h} })
	}()
	a := <-addrs
	defer func() {
		signals <- syscall.SIGTERM
		<-done
	}()
	conn, err := net.Dial("tcp", a[1].String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	answered := time.Now()
	conn.SetReadDeadline(answered.Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want the router to close it (EOF)", err)
	}
	if got := time.Since(answered); got < idle {
		t.Errorf("idle connection closed after %s, before --idle-timeout %s", got, idle)
	}
}
