//go:build !unix

package tlsconfig

import "io/fs"

// inode is 0 where the platform has none to give.
func inode(fs.FileInfo) uint64 { return 0 }
