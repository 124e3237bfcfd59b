package tlsconfig

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/tlsconfig/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// logBuffer is an hclog.Logger whose lines a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &lockedWriter{w: &b.buf, mu: &b.mu}})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A rotated CA file verifies the connections made after the interval
// (ghostunnel #220: read at start only, a CA rotation broke every
// connection until a restart).
func TestClientReloadsRotatedCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "server", nil, loopback)
	s, sclk := newTestServer(t, ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, nil)
	c, err := NewClient(ClientFiles{CAFile: ca.File, ServerName: "127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cclk := &clock{t: time.Now()}
	c.reload.now, c.reload.nextCheck = cclk.now, cclk.t.Add(c.reload.interval)
	if _, err := handshake(t, s.Config(), c.Config()); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	// The new CA over the old one's file, the server's pair from it.
	next := tlstest.NewCA(t, t.TempDir(), "next")
	next.Server(t, t.TempDir(), "server", nil, loopback).WriteTo(t, srv.CertFile, srv.KeyFile)
	next.WriteTo(t, ca.File)
	sclk.t, cclk.t = sclk.t.Add(DefaultInterval), cclk.t.Add(DefaultInterval)
	if _, err := handshake(t, s.Config(), c.Config()); err != nil {
		t.Fatalf("after the CA and the server's pair were rotated: %v; want the new CA to verify the new pair", err)
	}
}

// An expired, a not yet valid and an expiring certificate load, each with
// a warning naming its file and NotAfter, at start and at a reload.
func TestValidityWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	now := time.Now()
	expired := ca.ServerValid(t, dir, "expired", now.Add(-48*time.Hour), now.Add(-time.Hour), loopback)
	var logs logBuffer
	s, clk := newTestServer(t, ServerFiles{CertFile: expired.CertFile, KeyFile: expired.KeyFile}, logs.logger())
	want := regexp.MustCompile(`\[WARN\] +TLS certificate expired.*file=` + regexp.QuoteMeta(expired.CertFile) +
		`.*not_after=` + regexp.QuoteMeta(expired.Cert.NotAfter.UTC().Format(time.RFC3339)))
	if !want.MatchString(logs.String()) {
		t.Errorf("at start with an expired certificate: want a warning matching %s; log:\n%s", want, logs.String())
	}
	cfg := clientConfig(ca)
	cfg.InsecureSkipVerify = true // the expired certificate is served all the same
	if got, err := handshake(t, s.Config(), cfg); err != nil || !got.Equal(expired.Cert) {
		t.Errorf("an expired certificate: handshake %v; want it served", err)
	}

	for _, tc := range []struct {
		name, warning       string
		notBefore, notAfter time.Time
	}{
		{"early", "TLS certificate not yet valid", now.Add(time.Hour), now.Add(48 * time.Hour)},
		{"soon", "TLS certificate expires soon", now.Add(-time.Hour), now.Add(3 * 24 * time.Hour)},
	} {
		p := ca.ServerValid(t, t.TempDir(), tc.name, tc.notBefore, tc.notAfter, loopback)
		p.WriteTo(t, expired.CertFile, expired.KeyFile)
		clk.t = clk.t.Add(DefaultInterval)
		if _, err := handshake(t, s.Config(), cfg); err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`\[WARN\] +` + tc.warning + `.*file=` + regexp.QuoteMeta(expired.CertFile) +
			`.*not_after=` + regexp.QuoteMeta(tc.notAfter.UTC().Format(time.RFC3339)))
		if !want.MatchString(logs.String()) {
			t.Errorf("reloaded %s: want a warning matching %s; log:\n%s", tc.name, want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "[WARN]"); n != 3 {
		t.Errorf("%d warnings, want 3, one a load:\n%s", n, logs.String())
	}
}

// Refusals logs the first refused handshake of a host, counts the next
// ones within RefusalInterval, and logs again after it with the count; a
// client that hung up says nothing above DEBUG.
func TestRefusalsRateLimited(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	r := NewRefusals(logs.logger())
	clk := &clock{t: time.Now()}
	r.now = clk.now
	refused := errors.New("tls: client didn't provide a certificate")
	for range 100 {
		r.Refused("grpc", "192.0.2.1:1234", refused)
		r.Refused("grpc", "192.0.2.2:1234", refused)
		r.Refused("grpc", "192.0.2.3:1234", context.Canceled) // not TLS: still rate-limited
		r.Refused("grpc", "192.0.2.4:1234", &net.OpError{Op: "read", Err: errors.New("EOF"), Source: nil})
	}
	clk.t = clk.t.Add(RefusalInterval)
	r.Refused("grpc", "192.0.2.1:5678", refused)
	out := logs.String()
	if n := strings.Count(out, "TLS handshake refused"); n != 5 {
		t.Errorf("%d refusals logged, want 5 (three hosts, one of them twice; the fourth's EOF at DEBUG):\n%s", n, out)
	}
	if !strings.Contains(out, `peer=192.0.2.1:5678 reason="no client certificate given"`) || !strings.Contains(out, "refused_unlogged=99") {
		t.Errorf("want the second line of 192.0.2.1 with its reason and refused_unlogged=99:\n%s", out)
	}
}

// The worker endpoint's gRPC credentials and an HTTP listener's ErrorLog
// log a client refused for want of a certificate, at WARN with its address.
func TestRefusedHandshakesLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "server", nil, loopback)
	var logs logBuffer
	s, _ := newTestServer(t, ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File}, logs.logger())
	noCert := clientConfig(ca)

	g := grpc.NewServer(grpc.Creds(s.Credentials()))
	healthpb.RegisterHealthServer(g, health.NewServer())
	glis := listen(t)
	go g.Serve(glis)
	defer g.Stop()
	cc, err := grpc.NewClient("passthrough:///"+glis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(noCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("gRPC without a client certificate: served, want refused")
	}

	// Another listener's Server: one Server's refusals of a host share
	// their RefusalInterval.
	s2, _ := newTestServer(t, ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File}, logs.logger())
	hs := &http.Server{Handler: http.NotFoundHandler(), ErrorLog: s2.ErrorLog(nil)}
	hlis := listen(t)
	go hs.Serve(tls.NewListener(hlis, s2.Config("h2", "http/1.1")))
	defer hs.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}}
	if resp, err := hc.Get("https://" + hlis.Addr().String() + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("HTTP without a client certificate: served, want refused")
	}

	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), "TLS handshake refused") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("want a refusal logged per listener; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // the server logs after the client saw the refusal
	}
	if !regexp.MustCompile(`\[WARN\] +TLS handshake refused: peer=127\.0\.0\.1:\d+ reason="no client certificate given"`).MatchString(logs.String()) {
		t.Errorf("want WARN lines naming the peer and the reason:\n%s", logs.String())
	}
	for _, l := range []string{"listener=grpc", "listener=http"} {
		if !strings.Contains(logs.String(), l) {
			t.Errorf("want a refusal with %s:\n%s", l, logs.String())
		}
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}
