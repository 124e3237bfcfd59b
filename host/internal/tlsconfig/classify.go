package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"reflect"
	"strings"
)

// Failure is what went wrong in a TLS handshake, as Classify reads it.
type Failure int

// The failures Classify tells apart.
const (
	// NotFailed: the error is not a TLS one (a reset, a timeout, EOF).
	NotFailed Failure = iota
	// NotTLS: the peer does not speak TLS (its first bytes are no TLS record).
	NotTLS
	// UnknownAuthority: the peer's certificate is signed by no trusted CA.
	UnknownAuthority
	// Expired: the peer's certificate (or one of its chain) has expired or
	// is not yet valid.
	Expired
	// WrongName: the peer's certificate is not valid for the name or
	// address dialed.
	WrongName
	// BadCertificate: the peer's certificate was refused otherwise.
	BadCertificate
	// NoCertificate: a client gave no certificate where one is required.
	NoCertificate
	// PeerRefusedCertificate: the peer refused this side's certificate
	// (its alert says so: bad, unknown CA, expired, revoked, required...).
	PeerRefusedCertificate
	// PeerAlert: the peer ended the handshake with another alert.
	PeerAlert
	// OtherTLS: another TLS error (no common protocol version or cipher...).
	OtherTLS
)

// TLS alerts that refuse a certificate (RFC 8446, 6.2).
const (
	alertBadCertificate      = 42
	alertAccessDenied        = 49
	alertCertificateRequired = 116
)

// Classify reads a handshake's error by its types: x509's errors, tls's
// verification and record errors, and the alert a peer sent (a net.OpError
// "remote error" over crypto/tls's alert, or a tls.AlertError). alert is
// the peer's alert, 0 when none.
func Classify(err error) (f Failure, alert uint8) {
	if err == nil {
		return NotFailed, 0
	}
	if a, ok := peerAlert(err); ok {
		if (a >= alertBadCertificate && a <= alertAccessDenied && a != 47) || a == alertCertificateRequired {
			return PeerRefusedCertificate, a
		}
		return PeerAlert, a
	}
	var (
		header  tls.RecordHeaderError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		name    x509.HostnameError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &header):
		return NotTLS, 0
	case errors.As(err, &unknown):
		return UnknownAuthority, 0
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return Expired, 0
	case errors.As(err, &name):
		return WrongName, 0
	case errors.As(err, &invalid), errors.As(err, &verify):
		return BadCertificate, 0
	}
	// crypto/tls has no type for these; its words are stable.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "tls: client didn't provide a certificate"):
		return NoCertificate, 0
	case strings.Contains(msg, "tls: first record does not look like a TLS handshake"):
		// As net/http logs a RecordHeaderError, its type lost.
		return NotTLS, 0
	case strings.HasPrefix(msg, "remote error: tls: "):
		return PeerAlert, 0
	case strings.HasPrefix(msg, "tls: "):
		return OtherTLS, 0
	}
	return NotFailed, 0
}

// peerAlert is the alert a peer sent, if err is one.
func peerAlert(err error) (uint8, bool) {
	var qa tls.AlertError
	if errors.As(err, &qa) {
		return uint8(qa), true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	// crypto/tls's alert type is unexported; it is a uint8.
	if v := reflect.ValueOf(op.Err); v.Kind() == reflect.Uint8 {
		return uint8(v.Uint()), true
	}
	return 0, false
}

var failureNames = [...]string{
	NotFailed:              "the handshake did not complete",
	NotTLS:                 "the peer does not speak TLS",
	UnknownAuthority:       "certificate signed by an unknown authority",
	Expired:                "certificate expired or not yet valid",
	WrongName:              "certificate not valid for the name dialed",
	BadCertificate:         "certificate refused",
	NoCertificate:          "no client certificate given",
	PeerRefusedCertificate: "the peer refused this side's certificate",
	PeerAlert:              "the peer ended the handshake with an alert",
	OtherTLS:               "TLS failure",
}

// String says f in a few words, for logs.
func (f Failure) String() string {
	if f < 0 || int(f) >= len(failureNames) {
		return "unknown"
	}
	return failureNames[f]
}
