//go:build unix

package tlsconfig

import (
	"io/fs"
	"syscall"
)

// inode is fi's inode number: a file replaced by a rename (or a
// Kubernetes Secret's symlink swap) has another, even when its size and
// modification time, at the file system's granularity, are the same.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
