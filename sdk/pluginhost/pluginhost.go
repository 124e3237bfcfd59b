package pluginhost

import "github.com/hashicorp/go-plugin"

// ProtocolVersion is the vigil.plugin API version this sdk speaks. Host and
// adapter negotiate the highest version both list in their plugin sets.
const ProtocolVersion = 1

// PluginName is the key of the engine plugin in a plugin set.
const PluginName = "engine"

// Handshake is shared by host and adapters (sdk.Serve answers it). The
// magic cookie is not a security measure: it stops an adapter binary from
// being run by hand as if it were a normal program.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "VIGIL_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "0b1c8f7e6f3a4d2a9c5e7b1d3f5a7c9e",
}

// EnvLogLevel is the variable through which Launch tells the adapter the
// host's log level (trace, debug, info, warn or error), so that
// sdk.Logger writes nothing the host would drop. Default: info.
const EnvLogLevel = "VIGIL_PLUGIN_LOG_LEVEL"
