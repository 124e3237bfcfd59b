// Package enginemock is the engine-independent half of a stand-in engine for
// adapter tests: a real gRPC server whose engine-specific services a mock
// registers, and everything else.
//
//   - Engine state: not ready until a startup delay has passed, then
//     sleeping, paused or stopped ([Condition]); named health signals whose
//     status the mock derives from the condition ([Config.Health]), pinned
//     by hand through the control surface, and published to the mock's own
//     health view on every change ([Config.Publish]).
//   - grpc.health.v1's Watch as engine servers answer it ([WatchMode],
//     [HealthServer]).
//   - Generation ([Engine.Generate]): deterministic output ([OutputToken],
//     [TokenText]) and log probabilities ([PositionLogprobs]), a delay
//     between messages or, in step mode ([Config.StepInterval]), one
//     engine-wide step giving every stream its next token, tokens grouped
//     per message, max, min and stop tokens, aborts, and streams held or failed at a
//     token on request.
//   - The JSON control surface over HTTP ([Engine.Handler]) and the command
//     line every mock shares ([Command]).
//
// A mock for one engine keeps only its wire: it registers the engine's
// services ([Config.Register]), says which health signals exist and how
// they derive, turns each wire request into a [Request] and each [Chunk]
// into the engine's message. Health reaches the wire by whichever way the
// engine has: grpc-go's health.Server fed from Publish (vLLM, older SGLang),
// snapshots pushed from Publish onto a stream (SGLang's WatchEngineState),
// or [Engine.Status] read on each call (TensorRT-LLM's HealthCheck).
package enginemock
