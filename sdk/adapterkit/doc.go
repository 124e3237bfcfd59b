// Package adapterkit is the engine-independent half of a vigil engine
// adapter for an engine reached over gRPC: the machinery every adapter
// needs beyond its engine's own wire types. Adapters opt in; sdk.Engine
// stays small.
//
// An adapter describes its engine in a [Spec] and embeds the [Adapter] that
// New builds from it, adding what is its engine's own (sdk.Generator with
// [Relay] over [Adapter.Conn]):
//
//   - Start checks the request ([CheckStart]: a malformed engine address or
//     an unknown engine option is an *sdk.FieldError naming the field, an
//     sdk.ErrInvalidArgument), dials the engine
//     once ([Dial]), waits within the startup deadline, against the
//     caller's context, until every [Signal] serves, and reads the
//     [sdk.Worker]. A failed Start closes the connection and may be
//     retried.
//   - WatchAvailability follows the same signals ([Merge]): liveness
//     signals that stop serving are Lost, readiness ones NotReady, and Lost
//     is terminal; a liveness signal that drains ([DrainingHealthService],
//     Signal.Drains) is Draining instead, while the connection and the
//     lifetime id hold. One list drives both, so nothing the watch takes for
//     loss can hold while Start reports the engine serving. Signals come
//     from a grpc.health.v1 service ([HealthService]), a unary health RPC
//     polled with the health policy's interval, deadline and failure count
//     (a Signal with only Check), or a stream of the engine's own (Watch).
//     Every Check the watch polls is judged by one healthwatch.Busy per
//     engine, over a healthwatch.PingConn that Start opens: a Check that
//     times out while the engine answers an HTTP/2 PING is busy, not
//     failed, up to sdk.HealthPolicy.BusyTimeout, and the availability
//     stream says so (sdk.Event.Busy). A liveness status other than
//     SERVING is held for sdk.HealthPolicy.Confirm before it counts.
//   - [LifetimeSource] follows the connection: after a reconnect the
//     engine's lifetime id is read again and a different one is Lost; an
//     engine without one is Lost when the connection closes. While the
//     engine answers without serving, Start opens a new connection at most
//     every [ProbeInterval], to reach another process on the same port
//     (SO_REUSEPORT), and logs the instance it took.
//   - [Relay] forwards a generation, aborting the engine request when the
//     caller goes away; [Classify] maps engine errors to the sdk's classes.
//     A Generation that names [Adapter.InFlight] is also aborted by
//     Shutdown if it is still in flight, before the connection closes. A
//     Generation without Abort, for an engine that has no abort call,
//     aborts by closing its stream.
//
// A request field the engine cannot honour is refused before any output
// with an error wrapping sdk.ErrInvalidArgument whose message, after the
// class's "invalid argument: ", starts with the field's wire name and a
// colon: fmt.Errorf("%w: min_p: this engine has no min_p", sdk.ErrInvalidArgument).
// The wire name is the vigil.plugin.v1 GenerateRequest field's (prompt,
// max_tokens, temperature, top_p, top_k, seed, stop, stop_token_ids,
// ignore_eos, min_tokens, min_p); vigil's router reads it to fill the
// OpenAI error's "param" with the client's own field name.
//
// Every timing comes from sdk.HealthPolicy, whose defaults are written once
// in package sdk.
package adapterkit
