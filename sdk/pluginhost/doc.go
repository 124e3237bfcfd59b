// Package pluginhost is the host's side of vigil.plugin.v1: it is for
// vigil's host, and for tools that launch engine adapters (a conformance
// checker, a benchmark), not for adapter authors, whose contract is
// package [github.com/vigilhq/vigil/sdk].
//
// [Launch] starts an adapter executable over hashicorp/go-plugin's
// handshake (AutoMTLS, gRPC) and returns a [Plugin] whose Engine calls the
// adapter across the process boundary: error classes, field errors and
// availability events come back as the sdk defines them, an adapter's log
// entries reach the host's logger at their level, and a request field the
// adapter does not read is refused naming it. [Plugin.Ping] tells an
// adapter that answers from a frozen one (stopped, swapped out, its server
// wedged), which go-plugin, reporting only an exit, does not. [Handshake], [PluginName] and
// [ProtocolVersion] are the handshake an adapter written without this sdk
// answers; [EnvLogLevel] tells it the host's log level.
//
// The sdk's release tag (sdk/vX.Y.Z) freezes this package's API as it
// freezes package sdk's: see the compatibility policy in package sdk.
package pluginhost
