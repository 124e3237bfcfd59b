//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package enginemock

import (
	"errors"
	"syscall"
)

func setReusePort(_, _ string, _ syscall.RawConn) error {
	return errors.New("--reuseport: SO_REUSEPORT is not available on this platform")
}
