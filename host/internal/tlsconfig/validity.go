package tlsconfig

import (
	"crypto/x509"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ExpiryWarning is how long before its NotAfter a certificate is warned
// about: a week, time for a rotation that did not happen to be noticed
// and done by hand.
const ExpiryWarning = 7 * 24 * time.Hour

// checkValidity warns, naming file, of each certificate of certs that has
// expired, is not yet valid, or expires within ExpiryWarning of now. Such
// a certificate is used all the same: refusing it would turn a
// certificate a peer may not check (or whose rotation is under way) into
// an outage, and a peer that checks refuses it with its own error.
func checkValidity(log hclog.Logger, file string, certs []*x509.Certificate, now time.Time) {
	for _, c := range certs {
		args := []any{"file", file, "subject", c.Subject.String(),
			"not_before", c.NotBefore.UTC().Format(time.RFC3339), "not_after", c.NotAfter.UTC().Format(time.RFC3339)}
		switch {
		case now.After(c.NotAfter):
			log.Warn("TLS certificate expired; it is used all the same, and peers that check it refuse it", args...)
		case now.Before(c.NotBefore):
			log.Warn("TLS certificate not yet valid; it is used all the same, and peers that check it refuse it", args...)
		case c.NotAfter.Sub(now) < ExpiryWarning:
			log.Warn("TLS certificate expires soon", append(args, "expires_in", c.NotAfter.Sub(now).Round(time.Minute).String())...)
		}
	}
}

func orNull(log hclog.Logger) hclog.Logger {
	if log == nil {
		return hclog.NewNullLogger()
	}
	return log
}
