// Package tlsconfig builds the crypto/tls configurations of vigil's
// listeners (the worker endpoint, the router's gRPC and HTTP APIs) and of
// the router's connections to workers, from PEM files that it reloads
// when they change.
//
// Reloading polls: on a handshake, at most once per DefaultInterval, the
// files are stat'ed, and when any one's modification time, size or inode
// changed the whole set is read again. A set that does not load (a certificate
// written before its key, a truncated file) keeps the previous one in use
// and is logged once per change, so a rotation that writes the two files
// one after the other is picked up once both are in place. Polling
// rather than fsnotify: it follows the files through renames and
// Kubernetes' symlink swaps of a mounted Secret (which a watch on the
// file misses), needs no goroutine to stop, and costs a stat per file
// every Interval while handshakes happen, none while idle.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultInterval is how often, at most, the files are checked for
// changes: a rotated certificate is in use within it of the first
// handshake after the rotation.
const DefaultInterval = 2 * time.Second

// ServerFiles name the PEM files of a listener.
type ServerFiles struct {
	// CertFile and KeyFile are the certificate (its chain after it) and
	// its private key; both are required.
	CertFile, KeyFile string
	// ClientCAFile, if set, turns on mTLS: a client must present a
	// certificate signed by one of its CA certificates.
	ClientCAFile string
}

// ClientFiles name what a client (vigil route dialing workers) uses.
type ClientFiles struct {
	// CAFile holds the CA certificates that sign the servers'
	// certificates; "" means the system's roots. Reloaded as the client
	// certificate is: a rotated CA verifies the connections made after it.
	CAFile string
	// CertFile and KeyFile, both or neither, are the client certificate
	// presented to servers that ask for one (mTLS); reloaded.
	CertFile, KeyFile string
	// ServerName is checked against the servers' certificates in place of
	// the address dialed, for certificates without IP SANs; "" means the
	// address's host.
	ServerName string
}

// Server is a listener's TLS configuration, reloaded from its files.
type Server struct {
	files    ServerFiles
	reload   *reloader[serverState]
	refusals *Refusals
}

type serverState struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool // nil without ClientCAFile
}

// NewServer loads files and returns their Server; the error names the file
// that did not load and why. log receives the reloads and their failures,
// warnings of certificates expired or expiring, and the handshakes refused
// (Credentials, ErrorLog).
func NewServer(files ServerFiles, log hclog.Logger) (*Server, error) {
	paths := []string{files.CertFile, files.KeyFile}
	if files.ClientCAFile != "" {
		paths = append(paths, files.ClientCAFile)
	}
	r, err := newReloader(paths, func() (serverState, error) { return loadServer(files, orNull(log)) }, log)
	if err != nil {
		return nil, err
	}
	return &Server{files: files, reload: r, refusals: NewRefusals(log)}, nil
}

func loadServer(files ServerFiles, log hclog.Logger) (serverState, error) {
	var st serverState
	var err error
	if st.cert, err = loadPair(files.CertFile, files.KeyFile, log); err != nil {
		return st, err
	}
	if files.ClientCAFile != "" {
		if st.clientCAs, err = loadPool(files.ClientCAFile, log); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Config returns the listener's tls.Config: every handshake takes the
// current certificate and client CAs, and offers nextProtos by ALPN
// (gRPC needs "h2"; an HTTP server "h2" and "http/1.1"). It is TLS 1.2 at
// least; with a client CA, a client without a certificate it signed is
// refused in the handshake.
func (s *Server) Config(nextProtos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	if s.files.ClientCAFile != "" {
		base.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// The config a handshake uses is the one GetConfigForClient returns,
	// which carries the current state; base only says what it is like.
	proto := base.Clone()
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := s.reload.get()
		c := proto.Clone()
		c.Certificates = []tls.Certificate{st.cert}
		c.ClientCAs = st.clientCAs
		return c, nil
	}
	return base
}

// Client is the TLS configuration of connections to servers.
type Client struct {
	files  ClientFiles
	reload *reloader[clientState] // nil without files: the system's roots, no certificate
}

type clientState struct {
	roots *x509.CertPool   // nil: the system's
	cert  *tls.Certificate // nil without a client certificate
}

// NewClient loads files and returns their Client; the error names the file
// that did not load and why. log receives the reloads and their failures.
func NewClient(files ClientFiles, log hclog.Logger) (*Client, error) {
	if (files.CertFile == "") != (files.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	c := &Client{files: files}
	var paths []string
	for _, p := range []string{files.CAFile, files.CertFile, files.KeyFile} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return c, nil
	}
	r, err := newReloader(paths, func() (clientState, error) { return loadClient(files, orNull(log)) }, log)
	if err != nil {
		return nil, err
	}
	c.reload = r
	return c, nil
}

func loadClient(files ClientFiles, log hclog.Logger) (clientState, error) {
	var st clientState
	var err error
	if files.CAFile != "" {
		if st.roots, err = loadPool(files.CAFile, log); err != nil {
			return st, err
		}
	}
	if files.CertFile != "" {
		cert, err := loadPair(files.CertFile, files.KeyFile, log)
		if err != nil {
			return st, err
		}
		st.cert = &cert
	}
	return st, nil
}

// Config returns the tls.Config of a connection: servers verified against
// the CA file's certificates (or the system's) as they are now, under
// ServerName when set, and the current client certificate given to
// servers that ask. Credentials takes a Config for each connection, so
// that a rotated CA file verifies the connections made after it.
func (c *Client) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.files.ServerName}
	if c.reload == nil {
		return cfg
	}
	cfg.RootCAs = c.reload.get().roots
	if c.files.CertFile != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.reload.get().cert, nil
		}
	}
	return cfg
}

// loadPair reads a certificate and its key, and warns of the certificate's
// validity (checkValidity).
func loadPair(certFile, keyFile string, log hclog.Logger) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	var chain []*x509.Certificate
	for _, der := range cert.Certificate {
		if x, err := x509.ParseCertificate(der); err == nil {
			chain = append(chain, x)
		}
	}
	checkValidity(log, certFile, chain, time.Now())
	return cert, nil
}

// loadPool reads a PEM file of CA certificates, and warns of their
// validity (checkValidity). Blocks that are not certificates, or do not
// parse, are skipped, as x509.CertPool.AppendCertsFromPEM skips them.
func loadPool(path string, log hclog.Logger) (*x509.CertPool, error) {
	rest, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	var certs []*x509.Certificate
	for len(rest) > 0 {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			pool.AddCert(cert)
			certs = append(certs, cert)
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	checkValidity(log, path, certs, time.Now())
	return pool, nil
}

// reloader holds what load makes of a set of files, made again when a
// file's modification time or size changes, checked at most every
// interval.
type reloader[T any] struct {
	paths    []string
	load     func() (T, error)
	log      hclog.Logger
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	value     T
	stamps    []stamp // of the files value was loaded from, or last failed to load
	nextCheck time.Time
}

// stamp is what tells a file changed.
type stamp struct {
	mod  time.Time
	size int64
	ino  uint64
	err  string // the stat's error, so a file that vanishes and comes back counts as a change
}

func newReloader[T any](paths []string, load func() (T, error), log hclog.Logger) (*reloader[T], error) {
	r := &reloader[T]{paths: paths, load: load, log: orNull(log), interval: DefaultInterval, now: time.Now}
	r.stamps = r.stat()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.value = v
	r.nextCheck = r.now().Add(r.interval)
	return r, nil
}

func (r *reloader[T]) stat() []stamp {
	s := make([]stamp, len(r.paths))
	for i, p := range r.paths {
		fi, err := os.Stat(p)
		if err != nil {
			s[i].err = err.Error()
			continue
		}
		s[i].mod, s[i].size, s[i].ino = fi.ModTime(), fi.Size(), inode(fi)
	}
	return s
}

// get returns the current value, reloading it first if a file changed
// and the interval has passed since the last check.
func (r *reloader[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Before(r.nextCheck) {
		return r.value
	}
	r.nextCheck = now.Add(r.interval)
	stamps := r.stat()
	if equalStamps(stamps, r.stamps) {
		return r.value
	}
	r.stamps = stamps
	v, err := r.load()
	if err != nil {
		r.log.Error("TLS files changed but do not load; keeping the ones in use", "files", r.paths, "error", err)
		return r.value
	}
	r.value = v
	r.log.Info("TLS files reloaded", "files", r.paths)
	return r.value
}

func equalStamps(a, b []stamp) bool {
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size || a[i].ino != b[i].ino || a[i].err != b[i].err {
			return false
		}
	}
	return true
}
