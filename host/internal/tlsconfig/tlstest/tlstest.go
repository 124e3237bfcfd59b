// Package tlstest makes certificates for tests: a CA, and server and client
// certificates it signs, written as PEM files. Keys are made per test run
// and never committed.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// File is its certificate's PEM file.
	File string
}

// Pair is a certificate and key, and their PEM files.
type Pair struct {
	Cert              *x509.Certificate
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// NewCA makes a CA named name and writes its certificate under dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.File = filepath.Join(dir, name+".pem")
	write(t, ca.File, ca.CertPEM)
	return ca
}

// WriteTo writes ca's certificate over file by a rename, as a rotation of
// a CA file would.
func (ca *CA) WriteTo(t testing.TB, file string) {
	t.Helper()
	write(t, file, ca.CertPEM)
}

// Server makes a server certificate for the given DNS names and IPs (the
// SANs), named name, and writes name.pem and name-key.pem under dir.
func (ca *CA) Server(t testing.TB, dir, name string, dnsNames []string, ips ...net.IP) *Pair {
	t.Helper()
	return ca.issue(t, dir, name, &x509.Certificate{
		DNSNames: dnsNames, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// ServerValid is Server with the validity given: notBefore to notAfter,
// for certificates expired, not yet valid or about to expire.
func (ca *CA) ServerValid(t testing.TB, dir, name string, notBefore, notAfter time.Time, ips ...net.IP) *Pair {
	t.Helper()
	return ca.issue(t, dir, name, &x509.Certificate{
		IPAddresses: ips, NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client makes a client certificate named name and writes name.pem and
// name-key.pem under dir.
func (ca *CA) Client(t testing.TB, dir, name string) *Pair {
	t.Helper()
	return ca.issue(t, dir, name, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *CA) issue(t testing.TB, dir, name string, tmpl *x509.Certificate) *Pair {
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.Subject = pkix.Name{CommonName: name}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &Pair{
		Cert:     cert,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		CertFile: filepath.Join(dir, name+".pem"),
		KeyFile:  filepath.Join(dir, name+"-key.pem"),
	}
	write(t, p.CertFile, p.CertPEM)
	write(t, p.KeyFile, p.KeyPEM)
	return p
}

// WriteTo writes p's certificate and key over certFile and keyFile, each
// by a rename, as a rotation would.
func (p *Pair) WriteTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	write(t, keyFile, p.KeyPEM)
	write(t, certFile, p.CertPEM)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// write replaces path by a rename, so a reader never sees half a file.
func write(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
