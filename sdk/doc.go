// Package sdk is what an engine adapter for vigil imports.
//
// An adapter implements [Engine] and calls [Serve] from its main function;
// vigil runs it as a hashicorp/go-plugin subprocess and talks to it over gRPC
// (the vigil.plugin.v1 API). The host side of the same connection is
// [Launch], which returns an [Engine] backed by the subprocess.
//
// The life of an adapter, as the host drives it:
//
//  1. Info: name, version and [Capabilities]; the engine is not touched.
//  2. Start: connect to the engine, wait (up to the startup deadline) until it
//     serves, read its model and server information into a [Worker].
//  3. WatchAvailability: a channel of [Event] values, the current state first,
//     then every change; [Lost] is the last event.
//  4. Shutdown: release engine connections; the engine keeps running.
//
// An adapter logs with [Logger]: its entries reach vigil's log at their own
// level, under the adapter's name, and nothing below vigil's log level is
// written. What the adapter writes to stdout and stderr after [Serve], and
// the standard log package's lines, reach it too, at INFO.
//
// The packages below are opt-in:
//
//   - [github.com/vigilhq/vigil/sdk/adapterkit] is the engine-independent
//     half of an adapter for an engine reached over gRPC: an adapter
//     describes its engine's health signals and what it reports, embeds the
//     kit's Adapter, and adds its request mapping. Its Example is a whole
//     adapter.
//   - [github.com/vigilhq/vigil/sdk/healthwatch] follows an engine's
//     grpc.health.v1 service the way real engine servers need it followed,
//     and polls unary health RPCs.
//   - [github.com/vigilhq/vigil/sdk/sdktest] checks an adapter against this
//     contract, one named rule for each thing the documentation here says
//     an adapter does, in process, across the plugin boundary and as a
//     built executable; and reads availability streams in an adapter's own
//     tests.
//   - [github.com/vigilhq/vigil/sdk/enginemock] is the engine-independent
//     half of a stand-in engine for those tests.
package sdk
