package pluginhost

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSocketPath: the directory the adapter would make its go-plugin Unix
// socket in (PLUGIN_UNIX_SOCKET_DIR, else TMPDIR, else /tmp, from the
// adapter's environment) is too long for a socket path on this platform
// (107 bytes on Linux, 103 on macOS). The adapter would fail to listen and
// exit before the handshake; Launch does not start it.
var ErrSocketPath = errors.New("the adapter's Unix socket directory is too long")

// socketNameLen is the longest name go-plugin's adapter side gives its
// socket inside the directory: "/plugin" and os.CreateTemp's random
// suffix, a uint32 in decimal (go-plugin v1.8.0, serverListener_unix).
const socketNameLen = len("/plugin") + len("4294967295")

// CheckSocketPath returns an error wrapping ErrSocketPath, naming the
// variable, its length and the limit, when the go-plugin socket an adapter
// with environment env (KEY=VALUE entries) makes would not fit in a Unix
// socket address. Launch calls it; a host calls it to refuse such a
// configuration before launching anything.
func CheckSocketPath(env []string) error {
	limit := maxSocketPath()
	if limit == 0 { // no Unix sockets: go-plugin listens on TCP
		return nil
	}
	dir, from := socketDir(env)
	if len(dir)+socketNameLen <= limit {
		return nil
	}
	return fmt.Errorf("%w: %s is %d bytes long (%q); the socket's path in it would be up to %d bytes, over this platform's limit of %d: set %s to a directory of at most %d bytes",
		ErrSocketPath, from, len(dir), dir, len(dir)+socketNameLen, limit, from, limit-socketNameLen)
}

// socketDir is the directory an adapter with environment env makes its
// socket in, and the variable that names it, as go-plugin and os.TempDir
// choose it.
func socketDir(env []string) (dir, from string) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v // the last one wins, as in os/exec
	}
	for _, name := range []string{"PLUGIN_UNIX_SOCKET_DIR", "TMPDIR"} {
		if vars[name] != "" {
			return strings.TrimSuffix(vars[name], "/"), name
		}
	}
	return "/tmp", "TMPDIR"
}
