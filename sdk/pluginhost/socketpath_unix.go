//go:build unix

package pluginhost

import "syscall"

// maxSocketPath is the longest path a Unix socket may have here: sun_path
// less its terminating NUL (108 bytes on Linux, 104 on macOS and the BSDs).
func maxSocketPath() int { return len(syscall.RawSockaddrUnix{}.Path) - 1 }
