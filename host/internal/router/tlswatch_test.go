package router

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/tlsconfig"
	"github.com/vigilhq/vigil/host/internal/tlsconfig/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

var loopbackIP = net.ParseIP("127.0.0.1")

// tlsWorker serves a fakeWorker with TLS from ca, requiring client
// certificates of clientCA when it is not nil.
func tlsWorker(t *testing.T, id string, ca, clientCA *tlstest.CA) *fakeWorker {
	t.Helper()
	dir := t.TempDir()
	pair := ca.Server(t, dir, id, nil, loopbackIP)
	files := tlsconfig.ServerFiles{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
	if clientCA != nil {
		files.ClientCAFile = clientCA.File
	}
	s, err := tlsconfig.NewServer(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return startWorker(t, id, "m", grpc.Creds(credentials.NewTLS(s.Config("h2"))))
}

// routerCreds are the router's worker credentials as vigil route makes
// them: ca's roots, and a client certificate of clientCA when not nil.
func routerCreds(t *testing.T, ca, clientCA *tlstest.CA) credentials.TransportCredentials {
	t.Helper()
	files := tlsconfig.ClientFiles{CAFile: ca.File}
	if clientCA != nil {
		p := clientCA.Client(t, t.TempDir(), "router")
		files.CertFile, files.KeyFile = p.CertFile, p.KeyFile
	}
	c, err := tlsconfig.NewClient(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Credentials()
}

// A TLS failure between router and worker reaches clients as 503 in
// OpenAI's shape (UNAVAILABLE over gRPC) with words naming which side
// refused what, never gRPC's transport text (a refused client certificate
// came as "write tcp ...: broken pipe" or the generic "could not be
// reached"); /health says 503 while every worker fails so; and the request
// is retried on a worker that takes the router.
func TestTLSFailuresNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, dir, "ca"), tlstest.NewCA(t, dir, "other")
	for _, tc := range []struct {
		name   string
		worker func(t *testing.T) *fakeWorker
		creds  credentials.TransportCredentials
		want   string
	}{
		{"no client certificate", func(t *testing.T) *fakeWorker { return tlsWorker(t, "w", ca, ca) },
			routerCreds(t, ca, nil), "the worker refused the router's TLS client certificate: it requires one"},
		{"client certificate of another CA", func(t *testing.T) *fakeWorker { return tlsWorker(t, "w", ca, ca) },
			routerCreds(t, ca, other), "the worker refused the router's TLS client certificate; --worker-cert-file must be signed"},
		{"worker certificate of another CA", func(t *testing.T) *fakeWorker { return tlsWorker(t, "w", other, nil) },
			routerCreds(t, ca, nil), "the router does not trust the worker's TLS certificate"},
		{"plaintext worker", func(t *testing.T) *fakeWorker { return startWorker(t, "w", "m") },
			routerCreds(t, ca, nil), "the worker does not speak TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRouterAt(t, PoolConfig{Credentials: tc.creds}, endpoints(tc.worker(t)))
			for _, api := range []string{"grpc", "http", "http stream"} {
				answer := r.answer(t, api)
				if !strings.Contains(answer, tc.want) {
					t.Errorf("%s: answer %q, want it to say %q", api, answer, tc.want)
				}
				for _, s := range transportText {
					if strings.Contains(answer, s) {
						t.Errorf("%s: the answer holds gRPC's transport text %q:\n%s", api, s, answer)
					}
				}
			}
			code, _, body := r.do(t, "GET", "/health", "")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"tls failing"`) || !strings.Contains(body, tc.want) {
				t.Errorf("/health: %d %s; want 503, status \"tls failing\" and the reason", code, body)
			}
		})
	}
}

// A worker that refuses the router's certificate is skipped for one that
// takes it: every request succeeds, and /health stays 200.
func TestTLSRefusalRetriedElsewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, dir, "ca"), tlstest.NewCA(t, dir, "other")
	refusing, taking := tlsWorker(t, "refusing", ca, other), tlsWorker(t, "taking", ca, ca)
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin, Credentials: routerCreds(t, ca, ca)},
		[]discovery.Registration{refusing.ep, taking.ep})
	for i := range 4 {
		if code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"hi"}`); code != http.StatusOK {
			t.Fatalf("request %d: %d %s, want 200 from the worker that takes the router's certificate", i, code, body)
		}
	}
	if n := taking.requests.Load(); n != 4 {
		t.Errorf("the worker that takes the router got %d requests, want 4", n)
	}
	if code, _, body := r.do(t, "GET", "/health", ""); code != http.StatusOK {
		t.Errorf("/health with one worker reachable: %d %s, want 200", code, body)
	}
}

// brokenConn is a TLS connection whose writes fail with EPIPE and whose
// reads return readErr: a worker that refused the client certificate and
// reset the connection before the router read its alert, or after.
type brokenConn struct {
	net.Conn
	readErr error
}

func (c brokenConn) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
}
func (c brokenConn) Read([]byte) (int, error)        { return 0, c.readErr }
func (c brokenConn) SetReadDeadline(time.Time) error { return nil }

// A write that fails before the worker's first byte (grpc-go then reports
// "write tcp ...: broken pipe") is explained by the alert a read finds, or
// else as a connection closed right after TLS set-up.
func TestTLSBrokenPipeExplained(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		readErr error
		want    string
	}{
		{"alert readable", &net.OpError{Op: "remote error", Err: tls.AlertError(116)}, "the worker refused the router's TLS client certificate: it requires one"},
		{"alert lost", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, closedAfterSetup},
	} {
		st := &tlsState{addr: "w", log: hclog.NewNullLogger()}
		c := &watchedConn{Conn: brokenConn{readErr: tc.readErr}, s: st}
		_, werr := c.Write([]byte("PRI * HTTP/2.0"))
		got := st.explain(status.Errorf(codes.Unavailable, "connection error: desc = %q", werr.Error()))
		if !strings.HasPrefix(status.Convert(got).Message(), tc.want) || status.Code(got) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE %q", tc.name, got, tc.want)
		}
		// Another failure's status is left as it is.
		other := status.Error(codes.Unavailable, "connection error: desc = \"dial tcp: connection refused\"")
		if got := st.explain(other); got != other {
			t.Errorf("%s: a refused dial explained as %v, want it kept", tc.name, got)
		}
	}
}
