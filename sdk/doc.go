// Package sdk is what an engine adapter for vigil imports.
//
// An adapter implements [Engine] and calls [Serve] from its main function;
// vigil runs it as a hashicorp/go-plugin subprocess and talks to it over gRPC
// (the vigil.plugin.v1 API). The host side of the same connection is
// package [github.com/vigilhq/vigil/sdk/pluginhost], whose Launch returns an
// [Engine] backed by the subprocess; an adapter author does not need it.
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
//
// # Compatibility
//
// From sdk/v0.1.0 on, the sdk module's tags (sdk/vX.Y.Z) follow semantic
// versioning for the vigil.plugin.v1 protocol and for the Go API of the
// packages sdk, sdk/pluginhost, sdk/adapterkit, sdk/healthwatch,
// sdk/sdktest and sdk/enginemock: within a major version a release only
// adds. sdktest and enginemock are frozen too, because adapter authors'
// tests call them; sdktest may add conformance rules in a minor release,
// each for something this documentation already says an adapter does.
// Packages under sdk/internal are not part of the API.
//
// Hosts and adapters of different releases work together over
// vigil.plugin.v1, which only grows by compatible additions (buf's
// breaking check holds it to its last release). A new field of
// GenerateRequest reaches only adapters that read it: an adapter lists the
// fields it reads (Capabilities.generate_request_fields, which the sdk
// fills), and the host refuses a request that sets another, with a 400
// (INVALID_ARGUMENT) naming the field, rather than have it dropped; an
// adapter that forwards requests but lists none is refused at startup. The
// host speaks plain Generate to an adapter that does not advertise
// Multiplex, such as one written without this sdk, and calls Embed only on
// an adapter that claims Capabilities.Embed (an Embedder).
//
// The client-facing vigil.worker.v1 API and the discovery metadata a
// worker publishes are compatible one release back: a router reads the
// workers of its own release and the one before. Nothing is kept for
// states before sdk/v0.1.0.
package sdk
