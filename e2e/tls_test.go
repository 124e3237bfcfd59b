package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// testCA is a certificate authority made for one test; its keys live in
// the test's temporary directory only.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// certPair is a certificate and its key, as PEM and as files.
type certPair struct {
	cert              *x509.Certificate
	certPEM, keyPEM   []byte
	certFile, keyFile string
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{SerialNumber: newSerial(t), Subject: pkix.Name{CommonName: "vigil test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, "ca.pem")}
	writeFileAtomic(t, ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// issue makes name.pem and name-key.pem under dir: a server certificate
// for dnsNames and ips, or a client certificate when both are empty.
func (ca *testCA) issue(t *testing.T, dir, name string, dnsNames []string, ips ...net.IP) *certPair {
	t.Helper()
	key := newECKey(t)
	usage := x509.ExtKeyUsageServerAuth
	if len(dnsNames) == 0 && len(ips) == 0 {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: newSerial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: dnsNames, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &certPair{cert: cert,
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		certFile: filepath.Join(dir, name+".pem"), keyFile: filepath.Join(dir, name+"-key.pem")}
	writeFileAtomic(t, p.certFile, p.certPEM)
	writeFileAtomic(t, p.keyFile, p.keyPEM)
	return p
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newSerial(t *testing.T) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writeFileAtomic replaces path by a rename, as a rotation would.
func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

var loopbackIP = net.ParseIP("127.0.0.1")

// workerHealth asks a worker's gRPC health service for "" over creds.
func workerHealth(t *testing.T, target string, creds credentials.TransportCredentials) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return r.GetStatus(), err
}

// postCompletion sends a completion request to the router's HTTP API with
// key as its Bearer token ("" for none) and returns the status and body.
func postCompletion(t *testing.T, r *router, e *engine, key string) (int, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":"Hello","max_tokens":3}`, e.servedModel)
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+r.HTTP+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("status %d, body not JSON: %v\n%s", resp.StatusCode, err, data)
	}
	return resp.StatusCode, m
}

// TestRouterWorkerMTLS: a worker that requires client certificates
// (--tls-client-ca-file) serves requests that vigil route forwards over
// mTLS (--worker-tls and its files), and refuses a client without a
// certificate; the router's HTTP API asks for its --api-key, answering
// 401 in OpenAI's error shape without it.
func TestRouterWorkerMTLS(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	server := ca.issue(t, dir, "worker", nil, loopbackIP)
	client := ca.issue(t, dir, "router", nil)

	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--tls-cert-file", server.certFile, "--tls-key-file", server.keyFile, "--tls-client-ca-file", ca.file}})
	v.waitLine("worker registered", 30*time.Second)

	// Refused: no certificate, and plaintext; served: the CA's client.
	noCert := credentials.NewTLS(&tls.Config{RootCAs: ca.pool()})
	if st, err := workerHealth(t, v.Listen, noCert); err == nil {
		t.Errorf("worker health over TLS without a client certificate: %v, want the handshake refused", st)
	}
	if st, err := workerHealth(t, v.Listen, insecure.NewCredentials()); err == nil {
		t.Errorf("worker health in plaintext: %v, want refused", st)
	}
	pair, err := tls.LoadX509KeyPair(client.certFile, client.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	withCert := credentials.NewTLS(&tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{pair}})
	if st, err := workerHealth(t, v.Listen, withCert); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("worker health over mTLS: %v, %v; want SERVING", st, err)
	}

	const key = "e2e-key"
	r := startRouter(t, c, svc, 1, "--worker-tls", "--worker-ca-file", ca.file,
		"--worker-cert-file", client.certFile, "--worker-key-file", client.keyFile, "--api-key", key)

	before := requestsTotal(t, m)
	code, body := postCompletion(t, r, e, key)
	if code != http.StatusOK {
		t.Fatalf("completion with the key through the router over mTLS: %d %v, want 200", code, body)
	}
	if n := requestsTotal(t, m) - before; n != 1 {
		t.Errorf("engine got %d requests, want 1", n)
	}

	code, body = postCompletion(t, r, e, "")
	want := map[string]any{"error": map[string]any{
		"message": "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).",
		"type":    "invalid_request_error", "param": nil, "code": nil}}
	if code != http.StatusUnauthorized {
		t.Errorf("completion without the key: %d, want 401", code)
	}
	if !reflect.DeepEqual(want, body) {
		t.Errorf("completion without the key: body %v, want %v", body, want)
	}
	code, body = postCompletion(t, r, e, "not-"+key)
	if code != http.StatusUnauthorized || body["error"].(map[string]any)["code"] != "invalid_api_key" {
		t.Errorf("completion with a wrong key: %d %v, want 401 with code invalid_api_key", code, body)
	}
	if n := requestsTotal(t, m) - before; n != 1 {
		t.Errorf("engine got %d requests after the refused ones, want still 1", n)
	}
}

// TestRouterWorkerServerName: a worker certificate with only a DNS name is
// verified under --worker-server-name, and requests flow.
func TestRouterWorkerServerName(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	server := ca.issue(t, dir, "worker", []string{"worker.vigil.test"})

	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--tls-cert-file", server.certFile, "--tls-key-file", server.keyFile}})
	v.waitLine("worker registered", 30*time.Second)
	r := startRouter(t, c, svc, 1, "--worker-tls", "--worker-ca-file", ca.file, "--worker-server-name", "worker.vigil.test")
	if code, body := postCompletion(t, r, e, ""); code != http.StatusOK {
		t.Fatalf("completion through the router to a worker named worker.vigil.test: %d %v, want 200", code, body)
	}
}

// peerCert makes a TLS handshake with addr and returns the certificate it
// presented.
func peerCert(addr string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// TestWorkerCertificateReload: the worker endpoint takes a rotated pair
// for new connections without a restart; a pair that does not load (a
// certificate written before its key) keeps the old one in use.
func TestWorkerCertificateReload(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	old := ca.issue(t, dir, "worker", nil, loopbackIP)
	next := ca.issue(t, t.TempDir(), "next", nil, loopbackIP)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: t.TempDir(), service: "llm",
		extra: []string{"--tls-cert-file", old.certFile, "--tls-key-file", old.keyFile}})
	v.waitLine("worker registered", 30*time.Second)
	if got, err := peerCert(v.Listen, ca.pool()); err != nil || !got.Equal(old.cert) {
		t.Fatalf("first handshake: %v, %v; want the first certificate", got.Subject, err)
	}

	// The certificate alone: the pair does not match; the old one stays.
	writeFileAtomic(t, old.certFile, next.certPEM)
	deadline := time.Now().Add(20 * time.Second)
	for v.findLine("do not load") == "" {
		if got, err := peerCert(v.Listen, ca.pool()); err != nil || !got.Equal(old.cert) {
			t.Fatalf("with a mismatched pair on disk: %v, %v; want the old certificate still served", got.Subject, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log of the pair that does not load; last lines:\n%s", v.proc.Tail(20))
		}
		time.Sleep(50 * time.Millisecond) // a pace for the handshakes; each is the event awaited
	}

	// The key follows: new connections get the new certificate.
	rotated := time.Now()
	writeFileAtomic(t, old.keyFile, next.keyPEM)
	for {
		got, err := peerCert(v.Listen, ca.pool())
		if err != nil {
			t.Fatalf("handshake during the rotation: %v", err)
		}
		if got.Equal(next.cert) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 20s; last lines:\n%s", v.proc.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("rotated certificate served %s after the key was written", time.Since(rotated).Round(time.Millisecond))
	v.waitLine("TLS files reloaded", 5*time.Second)
}

// getHealth is the router's GET /health: its status and body.
func getHealth(t *testing.T, r *router) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.HTTP + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestRouterWorkerTLSRefusalVisible: a worker that requires client
// certificates, behind a router that has none, refuses it: the HTTP client
// reads 503 in OpenAI's shape saying the worker refused the router's TLS
// client certificate (not "write tcp ...: broken pipe"), the router's
// /health says 503 "tls failing" with that reason, and the worker logs the
// refused handshake with the router's address.
func TestRouterWorkerTLSRefusalVisible(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	server := ca.issue(t, dir, "worker", nil, loopbackIP)
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
		extra: []string{"--tls-cert-file", server.certFile, "--tls-key-file", server.keyFile, "--tls-client-ca-file", ca.file}})
	v.waitLine("worker registered", 30*time.Second)
	r := startRouter(t, c, svc, 0, "--worker-tls", "--worker-ca-file", ca.file)

	// /health is 503 "no workers" until discovery answers, then "tls
	// failing" once the first connection to the worker failed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := getHealth(t, r)
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"status":"tls failing"`) {
			if !strings.Contains(body, "the worker refused the router's TLS client certificate") {
				t.Errorf("/health: %s, want the reason naming the refused client certificate", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health: %d %s, want 503 tls failing; router log:\n%s", code, body, r.proc.Tail(20))
		}
		time.Sleep(20 * time.Millisecond) // the router offers no event to await
	}
	code, body := postCompletion(t, r, e, "")
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(msg, "the worker refused the router's TLS client certificate: it requires one") {
		t.Errorf("completion: %d %v, want 503 saying the worker refused the router's TLS client certificate", code, body)
	}
	if line := v.waitLine("TLS handshake refused", 10*time.Second); !strings.Contains(line, "peer=127.0.0.1:") ||
		!strings.Contains(line, `reason="no client certificate given"`) || !strings.Contains(line, "[WARN]") {
		t.Errorf("worker's log line %q, want a WARN naming the peer and the reason", line)
	}
}

// TestRouterWorkerCARotation: the CA is rotated on disk (the router's
// --worker-ca-file, the worker's certificate and key) and the worker
// restarted on the new pair; the router, not restarted, verifies the new
// certificate against the new CA and requests succeed (ghostunnel #220:
// a CA read at start only made every request 503 until a restart).
func TestRouterWorkerCARotation(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	server := ca.issue(t, dir, "worker", nil, loopbackIP)
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{})
	tlsArgs := []string{"--tls-cert-file", server.certFile, "--tls-key-file", server.keyFile}
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: tlsArgs})
	v.waitLine("worker registered", 30*time.Second)
	r := startRouter(t, c, svc, 1, "--worker-tls", "--worker-ca-file", ca.file)
	if code, body := postCompletion(t, r, e, ""); code != http.StatusOK {
		t.Fatalf("before the rotation: %d %v, want 200", code, body)
	}

	next := newTestCA(t, t.TempDir())
	rotated := next.issue(t, t.TempDir(), "worker", nil, loopbackIP)
	v.term(t)
	v.wait(30 * time.Second)
	writeFileAtomic(t, ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: next.cert.Raw}))
	writeFileAtomic(t, server.keyFile, rotated.keyPEM)
	writeFileAtomic(t, server.certFile, rotated.certPEM)
	v2 := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: tlsArgs})
	v2.waitLine("worker registered", 30*time.Second)

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := postCompletion(t, r, e, "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the rotation: %d %v, want 200 without restarting the router; router log:\n%s", code, body, r.proc.Tail(20))
		}
		time.Sleep(100 * time.Millisecond) // a pace for the requests; each is the event awaited
	}
	if r.findLine("TLS files reloaded") == "" {
		t.Errorf("the router did not log the reload of --worker-ca-file; log:\n%s", r.proc.Tail(20))
	}
}
