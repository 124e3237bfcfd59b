//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package enginemock

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setReusePort sets SO_REUSEPORT on the socket before it binds: another
// process may then bind the same port, and the kernel spreads new
// connections between the two (on Linux by a hash of each connection's
// addresses), as with two Python gRPC servers on one port.
func setReusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
		return err
	}
	return serr
}
