package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/tlsconfig/tlstest"
)

var loopback = net.ParseIP("127.0.0.1")

// handshake runs a TLS handshake over loopback TCP and returns the
// certificate the client saw, or the error of the side that failed. The
// server writes a byte once its side is done, which the client reads: in
// TLS 1.3 a client learns that the server refused its certificate only
// then.
func handshake(t *testing.T, server, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	serr := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			serr <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := c.(*tls.Conn).Handshake(); err != nil {
			serr <- err
			return
		}
		_, err = c.Write([]byte{1})
		serr <- err
	}()
	cl, err := tls.Dial("tcp", lis.Addr().String(), client)
	if err != nil {
		<-serr
		return nil, err
	}
	defer cl.Close()
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := cl.Read(make([]byte, 1)); err != nil {
		<-serr
		return nil, err
	}
	if err := <-serr; err != nil {
		return nil, err
	}
	return cl.ConnectionState().PeerCertificates[0], nil
}

// clock is a settable clock for the reloader.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestServer(t *testing.T, files ServerFiles, log hclog.Logger) (*Server, *clock) {
	t.Helper()
	s, err := NewServer(files, log)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now()}
	s.reload.now = c.now
	s.reload.nextCheck = c.t.Add(s.reload.interval)
	return s, c
}

func clientConfig(ca *tlstest.CA) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// A rotated pair is served from the first handshake after the interval;
// before it, the old one is.
func TestServerReloadsRotatedPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	old := ca.Server(t, dir, "server", nil, loopback)
	s, clk := newTestServer(t, ServerFiles{CertFile: old.CertFile, KeyFile: old.KeyFile}, nil)
	cfg := s.Config()

	next := ca.Server(t, t.TempDir(), "next", nil, loopback)
	next.WriteTo(t, old.CertFile, old.KeyFile)

	got, err := handshake(t, cfg, clientConfig(ca))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(old.Cert) {
		t.Fatalf("within the interval: got certificate %v, want the old one %v", got.SerialNumber, old.Cert.SerialNumber)
	}
	clk.t = clk.t.Add(DefaultInterval)
	if got, err = handshake(t, cfg, clientConfig(ca)); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(next.Cert) {
		t.Fatalf("after the interval: got certificate %v, want the rotated one %v", got.SerialNumber, next.Cert.SerialNumber)
	}
}

// A certificate written before its key does not load: the old pair stays
// in use, the failure is logged once, and the new pair is taken once the
// key follows.
func TestServerKeepsOldPairWhenNewOneDoesNotLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	old := ca.Server(t, dir, "server", nil, loopback)
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := hclog.New(&hclog.LoggerOptions{Output: &lockedWriter{w: &logs, mu: &logMu}})
	s, clk := newTestServer(t, ServerFiles{CertFile: old.CertFile, KeyFile: old.KeyFile}, log)
	cfg := s.Config()

	next := ca.Server(t, t.TempDir(), "next", nil, loopback)
	if err := os.WriteFile(old.CertFile, next.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		clk.t = clk.t.Add(DefaultInterval)
		got, err := handshake(t, cfg, clientConfig(ca))
		if err != nil {
			t.Fatalf("with a mismatched pair on disk: %v; want the old pair served", err)
		}
		if !got.Equal(old.Cert) {
			t.Fatalf("with a mismatched pair on disk: got certificate %v, want the old one %v", got.SerialNumber, old.Cert.SerialNumber)
		}
	}
	logMu.Lock()
	n := strings.Count(logs.String(), "do not load")
	logMu.Unlock()
	if n != 1 {
		t.Fatalf("logged the failed reload %d times, want once:\n%s", n, logs.String())
	}

	if err := os.WriteFile(old.KeyFile, next.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(DefaultInterval)
	got, err := handshake(t, cfg, clientConfig(ca))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(next.Cert) {
		t.Fatalf("once the key followed: got certificate %v, want the new one %v", got.SerialNumber, next.Cert.SerialNumber)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// With a client CA, a client without a certificate, or with one another
// CA signed, is refused; one the CA signed is let in.
func TestServerRequiresClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	other := tlstest.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "server", nil, loopback)
	s, _ := newTestServer(t, ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File}, nil)
	cfg := s.Config()

	for _, tc := range []struct {
		name string
		pair *tlstest.Pair
		ok   bool
	}{
		{"no certificate", nil, false},
		{"another CA's", other.Client(t, dir, "stranger"), false},
		{"the CA's", ca.Client(t, dir, "client"), true},
	} {
		c, err := NewClient(ClientFiles{CAFile: ca.File, CertFile: fileOf(tc.pair, true), KeyFile: fileOf(tc.pair, false), ServerName: "127.0.0.1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = handshake(t, cfg, c.Config())
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake error %v, want success %v", tc.name, err, tc.ok)
		}
	}
}

func fileOf(p *tlstest.Pair, cert bool) string {
	switch {
	case p == nil:
		return ""
	case cert:
		return p.CertFile
	}
	return p.KeyFile
}

// A certificate with only a DNS name is verified under ServerName; without
// it, the address dialed (an IP) does not match.
func TestClientServerName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Server(t, dir, "server", []string{"worker.example"})
	s, _ := newTestServer(t, ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, nil)

	named, err := NewClient(ClientFiles{CAFile: ca.File, ServerName: "worker.example"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, s.Config(), named.Config()); err != nil {
		t.Errorf("with ServerName: %v", err)
	}
	unnamed, err := NewClient(ClientFiles{CAFile: ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := unnamed.Config()
	cfg.ServerName = "127.0.0.1" // as gRPC sets it from the address dialed
	if _, err := handshake(t, s.Config(), cfg); err == nil {
		t.Error("without ServerName: handshake succeeded against a certificate without the IP SAN, want a verification error")
	}
}

// Files that do not load are refused at start, naming the file.
func TestNewServerErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	a := ca.Server(t, dir, "a", nil, loopback)
	b := ca.Server(t, dir, "b", nil, loopback)
	for name, tc := range map[string]struct {
		files ServerFiles
		want  string
	}{
		"missing cert":   {ServerFiles{CertFile: dir + "/nope.pem", KeyFile: a.KeyFile}, "nope.pem"},
		"mismatched key": {ServerFiles{CertFile: a.CertFile, KeyFile: b.KeyFile}, "private key does not match"},
		"CA not PEM":     {ServerFiles{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.KeyFile}, "no PEM certificate"},
		"missing CA":     {ServerFiles{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: dir + "/ca-nope.pem"}, "ca-nope.pem"},
	} {
		_, err := NewServer(tc.files, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// A pair replaced by renames is reloaded even when the new files have the
// old ones' sizes and modification times, as on a file system with coarse
// timestamps: the inodes differ.
func TestServerReloadsSameSizeSameTimePair(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no inodes")
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	// Two pairs of one size: DER lengths vary by a few bytes, so some of a
	// few dozen collide.
	var old, next *tlstest.Pair
	bySize := map[[2]int]*tlstest.Pair{}
	for i := 0; i < 100 && next == nil; i++ {
		p := ca.Server(t, t.TempDir(), "server", nil, loopback)
		size := [2]int{len(p.CertPEM), len(p.KeyPEM)}
		if old = bySize[size]; old != nil {
			next = p
		}
		bySize[size] = p
	}
	if next == nil {
		t.Fatal("no two certificates of one size in 100 tries")
	}
	old.WriteTo(t, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	old.CertFile, old.KeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	s, clk := newTestServer(t, ServerFiles{CertFile: old.CertFile, KeyFile: old.KeyFile}, nil)
	cfg := s.Config()
	times := map[string]time.Time{}
	for _, f := range []string{old.CertFile, old.KeyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		times[f] = fi.ModTime()
	}
	next.WriteTo(t, old.CertFile, old.KeyFile)
	for f, mt := range times {
		if err := os.Chtimes(f, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = clk.t.Add(DefaultInterval)
	got, err := handshake(t, cfg, clientConfig(ca))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(next.Cert) {
		t.Fatalf("got certificate %v, want the rotated one %v", got.SerialNumber, next.Cert.SerialNumber)
	}
}
