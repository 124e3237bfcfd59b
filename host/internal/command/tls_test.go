package command

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/host/internal/tlsconfig/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TLS flags given in a combination that cannot work, or naming files that
// do not load, are configuration errors (exit 78) naming the flag, found
// before anything listens.
func TestTLSFlagsRejectBadInput(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	a := ca.Server(t, dir, "a", nil, net.ParseIP("127.0.0.1"))
	b := ca.Server(t, dir, "b", nil, net.ParseIP("127.0.0.1"))
	missing := filepath.Join(dir, "missing.pem")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	both := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert-file", a.CertFile}, `--tls-cert-file "` + a.CertFile + `": needs --tls-key-file`},
		{"key without cert", []string{"--tls-key-file", a.KeyFile}, `--tls-key-file "` + a.KeyFile + `": needs --tls-cert-file`},
		{"client CA without TLS", []string{"--tls-client-ca-file", ca.File}, `--tls-client-ca-file "` + ca.File + `": needs --tls-cert-file and --tls-key-file`},
		{"unreadable cert", []string{"--tls-cert-file", missing, "--tls-key-file", a.KeyFile}, `--tls-cert-file "` + missing + `": open`},
		{"unreadable key", []string{"--tls-cert-file", a.CertFile, "--tls-key-file", missing}, `--tls-key-file "` + missing + `": open`},
		{"unreadable client CA", []string{"--tls-cert-file", a.CertFile, "--tls-key-file", a.KeyFile, "--tls-client-ca-file", missing}, `--tls-client-ca-file "` + missing + `": open`},
		{"mismatched key", []string{"--tls-cert-file", a.CertFile, "--tls-key-file", b.KeyFile}, "--tls-cert-file, --tls-key-file: certificate"},
		{"client CA not PEM", []string{"--tls-cert-file", a.CertFile, "--tls-key-file", a.KeyFile, "--tls-client-ca-file", empty}, "--tls-client-ca-file: " + empty + ": no PEM certificate"},
	}
	routeOnly := []struct {
		name string
		args []string
		want string
	}{
		{"worker CA without worker TLS", []string{"--worker-ca-file", ca.File}, `--worker-ca-file "` + ca.File + `": needs --worker-tls`},
		{"worker server name without worker TLS", []string{"--worker-server-name", "w.example"}, `--worker-server-name "w.example": needs --worker-tls`},
		{"worker cert without worker TLS", []string{"--worker-cert-file", a.CertFile, "--worker-key-file", a.KeyFile}, `--worker-cert-file "` + a.CertFile + `": needs --worker-tls`},
		{"worker cert without key", []string{"--worker-tls", "--worker-cert-file", a.CertFile}, `--worker-cert-file "` + a.CertFile + `": needs --worker-key-file`},
		{"worker key without cert", []string{"--worker-tls", "--worker-key-file", a.KeyFile}, `--worker-key-file "` + a.KeyFile + `": needs --worker-cert-file`},
		{"unreadable worker CA", []string{"--worker-tls", "--worker-ca-file", missing}, `--worker-ca-file "` + missing + `": open`},
		{"worker CA not PEM", []string{"--worker-tls", "--worker-ca-file", empty}, "no PEM certificate"},
		{"worker pair mismatched", []string{"--worker-tls", "--worker-cert-file", a.CertFile, "--worker-key-file", b.KeyFile}, "--worker-cert-file, --worker-key-file: certificate"},
		{"key and key file", []string{"--api-key", "k", "--api-key-file", empty}, "--api-key and --api-key-file: give one"},
		{"blank key", []string{"--api-key", " "}, "--api-key: must not be empty or blank"},
		{"unreadable key file", []string{"--api-key-file", missing}, `--api-key-file "` + missing + `": open`},
		{"empty key file", []string{"--api-key-file", empty}, `--api-key-file "` + empty + `": the file is empty`},
	}
	check := func(t *testing.T, args []string, want string) {
		t.Helper()
		code, out := runArgs(t, args...)
		if code != ExitConfig {
			t.Errorf("exit code = %d, want %d; output:\n%s", code, ExitConfig, out)
		}
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	for _, tc := range both {
		t.Run("run/"+tc.name, func(t *testing.T) {
			check(t, append([]string{"run", "--registry-dir", t.TempDir(), "--listen", busyAddr(t)}, tc.args...), tc.want)
		})
		t.Run("route/"+tc.name, func(t *testing.T) {
			check(t, append([]string{"route", "--registry-dir", t.TempDir(), "--listen", busyAddr(t)}, tc.args...), tc.want)
		})
	}
	for _, tc := range routeOnly {
		t.Run("route/"+tc.name, func(t *testing.T) {
			check(t, append([]string{"route", "--registry-dir", t.TempDir(), "--listen", busyAddr(t)}, tc.args...), tc.want)
		})
	}
}

// The TLS flags are read from the environment, like the others (route's
// from VIGIL_ROUTE_*).
func TestTLSFlagsFromEnvironment(t *testing.T) {
	t.Setenv("VIGIL_ROUTE_TLS_CERT_FILE", "/some/cert.pem")
	code, out := runArgs(t, "route", "--registry-dir", t.TempDir(), "--listen", busyAddr(t))
	if code != ExitConfig || !strings.Contains(out, `--tls-cert-file "/some/cert.pem": needs --tls-key-file`) {
		t.Errorf("got exit %d, output:\n%s\nwant exit 78 naming --tls-cert-file", code, out)
	}
}

// vigil route with --tls-* and --api-key serves both APIs over TLS, asks
// clients for a certificate its client CA signed (logging those refused),
// and the HTTP API for the key.
func TestRouteServesTLSWithAPIKey(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "router", nil, net.ParseIP("127.0.0.1"))
	cl := ca.Client(t, dir, "client")
	reg := t.TempDir()
	w := discovery.Registration{Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 1, Engine: "vllm", Model: "m"}
	if err := file.New(reg, time.Minute).Register(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	args := []string{"--registry-dir", reg, "--tls-cert-file", srv.CertFile, "--tls-key-file", srv.KeyFile,
		"--tls-client-ca-file", ca.File, "--api-key", "k3y"}
	cfg := parseRouteArgs(t, args...)
	cfg.listen, cfg.httpListen = "127.0.0.1:0", "127.0.0.1:0"
	var logs lockedLog
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})
	src := notifySource{Discoverer: file.NewDiscoverer(reg, "llm", log), first: make(chan struct{})}
	signals := make(chan os.Signal, 2)
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveRoute(t.Context(), cfg, src, log, signals, func(g, h net.Addr) { addrs <- [2]net.Addr{g, h} })
	}()
	a := <-addrs
	<-src.first

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	pair, err := tls.LoadX509KeyPair(cl.CertFile, cl.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	get := func(tc *tls.Config, key string) (int, error) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://"+a[1].String()+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, nil
	}
	if code, err := get(withCert, "k3y"); err != nil || code != http.StatusOK {
		t.Errorf("HTTPS with certificate and key: %d, %v; want 200", code, err)
	}
	if code, err := get(withCert, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("HTTPS with certificate, no key: %d, %v; want 401", code, err)
	}
	if _, err := get(&tls.Config{RootCAs: pool}, "k3y"); err == nil {
		t.Errorf("HTTPS without a client certificate: served, want the handshake refused")
	}
	// The server logs after the client saw the refusal.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "TLS handshake refused"); {
		if time.Now().After(deadline) {
			t.Fatalf("no refused handshake logged; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := `[WARN]  tls: TLS handshake refused: peer=127.0.0.1:`; !strings.Contains(logs.String(), want) {
		t.Errorf("want a line with %q; log:\n%s", want, logs.String())
	}

	health := func(tc *tls.Config) error {
		cc, err := grpc.NewClient("passthrough:///"+a[0].String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	withCert.ServerName = "127.0.0.1"
	if err := health(withCert); err != nil {
		t.Errorf("gRPC health over mTLS: %v", err)
	}
	if err := health(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err == nil {
		t.Errorf("gRPC without a client certificate: served, want the handshake refused")
	}

	signals <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Errorf("after SIGTERM: %v, want nil (exit 0)", err)
	}
}

// parseRouteArgs parses route's flags as vigil route would, and loads the
// API key as routeAction does.
func parseRouteArgs(t *testing.T, args ...string) routeConfig {
	t.Helper()
	cmd := routeCommand()
	var cfg routeConfig
	var parseErr error
	cmd.Action = func(c *cli.Context) error {
		cfg, parseErr = parseRoute(c)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
	if err := app.Run(append([]string{"vigil", "route"}, args...)); err != nil {
		t.Fatalf("route %v: %v", args, err)
	}
	if parseErr != nil {
		t.Fatalf("route %v: %v", args, parseErr)
	}
	var err error
	if cfg.apiKey, err = loadAPIKey(cfg.apiKey, cfg.apiKeyFile); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// An API key on a plaintext listener off loopback is warned about; on
// loopback, or with TLS, it is not.
func TestRouteWarnsOfPlaintextAPIKey(t *testing.T) {
	for _, tc := range []struct {
		listen string
		tls    bool
		warn   bool
	}{
		{"0.0.0.0:8481", false, true},
		{"10.0.0.5:8481", false, true},
		{"0.0.0.0:8481", true, false},
		{"127.0.0.1:8481", false, false},
		{"localhost:8481", false, false},
	} {
		var out strings.Builder
		log := hclog.New(&hclog.LoggerOptions{Output: &out})
		logSecurity(log, routeConfig{httpListen: tc.listen, apiKey: "k"}, tc.tls)
		if got := strings.Contains(out.String(), "API key travels in plaintext"); got != tc.warn {
			t.Errorf("%s, TLS %v: warned %v, want %v:\n%s", tc.listen, tc.tls, got, tc.warn, out.String())
		}
		if strings.Contains(out.String(), "api_key=k ") {
			t.Errorf("the key itself was logged:\n%s", out.String())
		}
	}
}

// lockedLog is a log output a test reads while the server writes it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
