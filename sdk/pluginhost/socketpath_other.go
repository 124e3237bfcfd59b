//go:build !unix

package pluginhost

// maxSocketPath is 0: go-plugin listens on TCP here.
func maxSocketPath() int { return 0 }
