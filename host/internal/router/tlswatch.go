package router

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/tlsconfig"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// tlsState is why a worker connection's last attempt failed on TLS, if it
// did: its credentials (watchTLS) record it, the proxy answers it in place
// of gRPC's transport text, and /health reports it when every worker's
// last attempt failed so.
type tlsState struct {
	addr string
	log  hclog.Logger

	mu   sync.Mutex
	last *tlsFailure // nil: not a TLS failure, or none
}

// tlsFailure is one failed attempt: msg for clients, err as it came.
// errs are the last errors that msg explained: one attempt's read and
// write can fail on the same refusal, and gRPC reports either.
type tlsFailure struct {
	msg  string
	err  error
	errs []error
}

// set records f (nil: the attempt did not fail on TLS), logging a change.
func (s *tlsState) set(f *tlsFailure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.last
	if f != nil {
		f.errs = []error{f.err}
		if old != nil && old.msg == f.msg {
			f.errs = append(f.errs, old.errs[:min(len(old.errs), 3)]...)
		}
	}
	s.last = f
	switch {
	case f != nil && (old == nil || old.msg != f.msg):
		s.log.Warn("worker connection failed on TLS; requests to it fail until it is fixed", "addr", s.addr, "reason", f.msg, "error", f.err)
	case f == nil && old != nil:
		s.log.Info("worker connection no longer fails on TLS", "addr", s.addr)
	}
}

// get is the last attempt's TLS failure; nil: none.
func (s *tlsState) get() *tlsFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// explain is err, a failed attempt's status, with the TLS failure that
// caused it in gRPC's words (which hold the recorded error's) replaced by
// the router's; UNAVAILABLE stays, so the request is retried elsewhere.
func (s *tlsState) explain(err error) error {
	if s == nil || status.Code(err) != codes.Unavailable {
		return err
	}
	f := s.get()
	if f == nil {
		return err
	}
	msg := status.Convert(err).Message()
	for _, e := range f.errs {
		if strings.Contains(msg, e.Error()) {
			return status.Error(codes.Unavailable, f.msg)
		}
	}
	return err
}

// failed records err, the error of an attempt, when it is a TLS one; a
// handshake's other errors (a reset, a timeout) clear the record, a
// read's do not (a probe's deadline may end one).
func (s *tlsState) failed(err error, handshake bool) {
	f, alert := tlsconfig.Classify(err)
	if f == tlsconfig.NotFailed {
		if handshake {
			s.set(nil)
		}
		return
	}
	s.set(&tlsFailure{msg: tlsMessage(f, alert), err: err})
}

// tlsMessage says a failure to clients, naming which side refused what
// and the flag to look at; it holds none of transportText.
func tlsMessage(f tlsconfig.Failure, alert uint8) string {
	const refused = "the worker refused the router's TLS client certificate"
	switch f {
	case tlsconfig.PeerRefusedCertificate:
		switch alert {
		case 116: // certificate_required
			return refused + ": it requires one; give the router --worker-cert-file and --worker-key-file"
		case 45: // certificate_expired
			return refused + ": it has expired; renew --worker-cert-file"
		}
		return refused + "; --worker-cert-file must be signed by a CA of the worker's --tls-client-ca-file"
	case tlsconfig.UnknownAuthority:
		return "the router does not trust the worker's TLS certificate: no CA of --worker-ca-file (or of the system, without it) signed it"
	case tlsconfig.Expired:
		return "the router refused the worker's TLS certificate: it has expired or is not yet valid"
	case tlsconfig.WrongName:
		return "the router refused the worker's TLS certificate: it is not valid for the worker's address; give it that IP as a SAN, or set --worker-server-name"
	case tlsconfig.BadCertificate:
		return "the router refused the worker's TLS certificate"
	case tlsconfig.NotTLS:
		return "the worker does not speak TLS: start it with --tls-cert-file, or drop the router's --worker-tls"
	case tlsconfig.PeerAlert:
		return fmt.Sprintf("the worker refused the router's TLS connection (TLS alert %d)", alert)
	}
	return "TLS with the worker failed; the router's log says why"
}

// closedAfterSetup is what a TLS 1.3 worker that refuses the client
// certificate looks like when its alert is lost (the connection reset
// before the router read it): TLS set up, then the connection broken
// before the worker's first byte.
const closedAfterSetup = "the worker closed the connection right after TLS set-up, before any answer: it most likely refused the router's TLS client certificate (--worker-cert-file)"

// watchTLS wraps a worker connection's credentials so that s learns of
// each attempt's TLS failure.
func watchTLS(c credentials.TransportCredentials, s *tlsState) credentials.TransportCredentials {
	return &watchedCreds{TransportCredentials: c, s: s, secure: c.Info().SecurityProtocol != "insecure"}
}

type watchedCreds struct {
	credentials.TransportCredentials
	s      *tlsState
	secure bool
}

func (w *watchedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := w.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		w.s.failed(err, true)
		return nil, nil, err
	}
	if !w.secure {
		return conn, info, nil
	}
	return &watchedConn{Conn: conn, s: w.s}, info, nil
}

func (w *watchedCreds) Clone() credentials.TransportCredentials {
	return &watchedCreds{TransportCredentials: w.TransportCredentials.Clone(), s: w.s, secure: w.secure}
}

// watchedConn is a TLS connection to a worker until its first byte read:
// in TLS 1.3 the worker's refusal of the client certificate comes after
// the handshake, as an alert the first read (or a write) meets.
type watchedConn struct {
	net.Conn
	s  *tlsState
	ok atomic.Bool // a byte came from the worker
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.ok.Load() {
		return n, err
	}
	if n > 0 {
		c.ok.Store(true)
		c.s.set(nil)
	} else if err != nil {
		c.s.failed(err, false)
	}
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && !c.ok.Load() {
		c.probe(err)
	}
	return n, err
}

// probe reads, briefly, what the worker sent before a write to it failed
// (its alert, when it refused the client certificate); when that is no
// TLS failure either, the write's error is recorded as closedAfterSetup.
func (c *watchedConn) probe(werr error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, rerr := c.Conn.Read(make([]byte, 1))
	if f, alert := tlsconfig.Classify(rerr); f != tlsconfig.NotFailed {
		c.s.set(&tlsFailure{msg: tlsMessage(f, alert), err: werr})
		return
	}
	c.s.set(&tlsFailure{msg: closedAfterSetup, err: werr})
}

// tlsFailing is the reason when every current worker's last connection
// attempt failed on TLS, "" otherwise: /health's answer then.
func (p *Pool) tlsFailing() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	reason := ""
	for _, c := range p.conns {
		f := c.tls.get()
		if f == nil {
			return ""
		}
		reason = f.msg
	}
	return reason
}

// httpErrorLog is ServerConfig.HTTPErrorLog, or the Server's logger.
func (s *Server) httpErrorLog() *log.Logger {
	if s.cfg.HTTPErrorLog != nil {
		return s.cfg.HTTPErrorLog
	}
	return s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
}
