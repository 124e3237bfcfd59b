// Package wire holds what both sides of vigil.plugin.v1 in the sdk share:
// the go-plugin handshake, the options of connections that carry token
// streams, the log relay's line handling, and the hooks through which
// package pluginhost reaches the client that package sdk implements. The
// host module cannot import it (Go's internal rule): what the host needs
// is exported from sdk or sdk/pluginhost.
package wire

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the vigil.plugin API version this sdk speaks.
const ProtocolVersion = 1

// PluginName is the key of the engine plugin in a plugin set.
const PluginName = "engine"

// Handshake is shared by host and adapters; see pluginhost.Handshake.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "VIGIL_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "0b1c8f7e6f3a4d2a9c5e7b1d3f5a7c9e",
}

// streamWindow is the static HTTP/2 flow-control window of the connections
// that carry token streams. A static window turns off gRPC's BDP estimator,
// which sends a PING for nearly every small message; with one message per
// token that doubles the writes and wake-ups per token on every hop.
const streamWindow = 1 << 20

// StreamDialOptions are the dial options for connections that carry token
// streams.
func StreamDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(streamWindow)}
}

// StreamServerOptions are the server options for servers of token streams.
func StreamServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(streamWindow)}
}

// Set by package sdk's init, which implements the host's side of the
// connection (unexported there, as sdk.TestPluginEngine uses it too):
var (
	// HostPluginSets are the versioned plugin sets a host dispenses the
	// engine from.
	HostPluginSets func() map[int]plugin.PluginSet
	// BindExited tells a dispensed engine how to learn that its adapter
	// process exited; it reports whether raw is the sdk's engine client.
	BindExited func(raw any, exited func() bool) bool
)
