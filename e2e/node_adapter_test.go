package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNodeAdapterConformance: an adapter written in JavaScript
// (testdata/node-adapter: @grpc/grpc-js, go-plugin's handshake and
// vigil.plugin.v1 by hand, plain Generate only) passes vigil plugin check
// --conformance against the toy engine: every rule that needs no hook
// passes and the others are listed as skipped, by name; an adapter that
// breaks a rule fails the check, exit 1, naming it.
func TestNodeAdapterConformance(t *testing.T) {
	skipShort(t)
	needNPM(t)
	t.Parallel()
	adapter := nodeAdapter(t)
	engine := startToyEngine(t)
	check := func(fault string) *proc {
		return startProcEnv(t, "vigil plugin check", []string{"NODE_ADAPTER_FAULT=" + fault}, vigilBin, "plugin", "check",
			"--engine-addr", engine, "--conformance", "--plugin-env", "NODE_ADAPTER_FAULT", adapter)
	}
	t.Run("passes", func(t *testing.T) {
		out := check("").exits(0, 3*time.Minute,
			"name          node", "capabilities  generate", "first event   SERVING",
			"  PASS  Generate ", "  PASS  GenerateIgnoreEOS ", "  PASS  FrozenIsLost ", "  PASS  SlowIsNotLost ", "  PASS  StartupDeadline ",
			"  SKIP  FailedIsLost ", "needs hook Harness.Fail", "  SKIP  GenerateCancel ", "needs hook Harness.Hold",
			" 0 failed, ")
		t.Log(out) // the rules' outcomes, for -v
	})
	t.Run("breaks a rule", func(t *testing.T) {
		check("accept-unknown-options").exits(1, 3*time.Minute,
			"  FAIL  StartUnknownOption ", `want a *sdk.FieldError for StartRequest.Options naming "sdktest-unknown-option"`,
			"conformance: sdktest: node failed StartUnknownOption/executable")
	})
}

// nodeAdapter installs testdata/node-adapter in a directory of its own,
// with the protos it loads and a TLS key pair, and returns its executable.
func nodeAdapter(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node-adapter")
	copyDir(t, "testdata/node-adapter", dir)
	for from, to := range map[string]string{
		"../proto/vigil/plugin/v1/engine.proto": "proto/vigil/plugin/v1/engine.proto",
		exampleDir + "/proto/toy/v1/toy.proto":  "proto/toy/v1/toy.proto",
	} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, to)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, to, string(b), 0o644)
	}
	if out, err := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund").CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	writeKeyPair(t, dir)
	exe := filepath.Join(dir, "adapter.mjs")
	if err := os.Chmod(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// writeKeyPair writes cert.pem and key.pem into dir: a self-signed
// certificate for localhost, as go-plugin's AutoMTLS wants of a plugin.
func writeKeyPair(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"vigil e2e"}},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
	writeFile(t, dir, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})), 0o600)
}
