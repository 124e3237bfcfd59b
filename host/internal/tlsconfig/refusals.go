package tlsconfig

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// RefusalInterval is how often, at most, the refused handshakes of one
// peer host are logged: a scanner or a misconfigured client retrying in a
// loop gets a line a minute, with the count of those left unlogged.
const RefusalInterval = time.Minute

// maxRefusalPeers bounds the hosts Refusals remembers; past it, the
// refusals of new hosts share one line a RefusalInterval.
const maxRefusalPeers = 4096

// Refusals logs refused TLS handshakes of a listener at WARN, with the
// peer's address and the reason, at most once per peer host per
// RefusalInterval. A client that closes before saying anything (EOF, a
// reset: a TCP health check) is logged at DEBUG only.
type Refusals struct {
	log hclog.Logger
	now func() time.Time

	mu    sync.Mutex
	peers map[string]*peerRefusals
}

type peerRefusals struct {
	logged   time.Time
	unlogged int
}

// NewRefusals returns a Refusals logging to log (nil: discarded).
func NewRefusals(log hclog.Logger) *Refusals {
	return &Refusals{log: orNull(log), now: time.Now, peers: map[string]*peerRefusals{}}
}

// Refused logs that the handshake of peer (host:port) with listener
// ("grpc", "http") failed with err.
func (r *Refusals) Refused(listener, peer string, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		r.log.Debug("TLS handshake ended by the client", "listener", listener, "peer", peer, "error", err)
		return
	}
	unlogged, ok := r.take(peer)
	if !ok {
		return
	}
	f, _ := Classify(err)
	r.log.Warn("TLS handshake refused", "peer", peer, "reason", f.String(), "error", err,
		"listener", listener, "refused_unlogged", unlogged)
}

// take reports whether peer's refusal is logged now, and how many of its
// host's went unlogged before it.
func (r *Refusals) take(peer string) (unlogged int, ok bool) {
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		host = peer
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.peers) >= maxRefusalPeers && r.peers[host] == nil {
		for h, p := range r.peers {
			if now.Sub(p.logged) >= RefusalInterval {
				delete(r.peers, h)
			}
		}
		if len(r.peers) >= maxRefusalPeers {
			host = "*"
		}
	}
	p := r.peers[host]
	if p != nil && now.Sub(p.logged) < RefusalInterval {
		p.unlogged++
		return 0, false
	}
	if p != nil {
		unlogged = p.unlogged
	}
	r.peers[host] = &peerRefusals{logged: now}
	return unlogged, true
}

// httpHandshakeError is how net/http's server logs a failed handshake:
// "http: TLS handshake error from 192.0.2.1:1234: <error>".
const httpHandshakeError = "http: TLS handshake error from "

// ErrorLog is an http.Server's ErrorLog for a listener of s: its TLS
// handshake errors are logged as Refusals logs them, the rest go to
// fallback as hclog's standard logger takes them.
func (s *Server) ErrorLog(fallback hclog.Logger) *log.Logger {
	return s.refusals.ErrorLog(fallback)
}

// ErrorLog is an http.Server's ErrorLog: its TLS handshake errors go to
// r, the rest to fallback as hclog's standard logger takes them.
func (r *Refusals) ErrorLog(fallback hclog.Logger) *log.Logger {
	std := orNull(fallback).StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	return log.New(&errorLogWriter{r: r, std: std}, "", 0)
}

type errorLogWriter struct {
	r   *Refusals
	std io.Writer
}

func (w *errorLogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	rest, ok := strings.CutPrefix(line, httpHandshakeError)
	if !ok {
		return w.std.Write(p)
	}
	// The peer's address ends at the first ": " (an IPv6 one is bracketed).
	peer, msg, _ := strings.Cut(rest, ": ")
	var err error = httpLoggedError{msg}
	if msg == "EOF" || strings.HasSuffix(msg, "connection reset by peer") {
		err = io.EOF
	}
	w.r.Refused("http", peer, err)
	return len(p), nil
}

// httpLoggedError is a handshake error as net/http logged it: its words only.
type httpLoggedError struct{ msg string }

func (e httpLoggedError) Error() string { return e.msg }
