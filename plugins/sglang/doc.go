// Package sglang is vigil's engine adapter for SGLang: it implements
// sdk.Engine, sdk.Generator and sdk.Embedder over SGLang's gRPC API, on the sdk's
// adapterkit, and keeps only what is SGLang's.
//
// The contract it relies on, as SGLang serves it (sgl-project/sglang, the
// gRPC server of package sglang.runtime.v1):
//
//   - SglangService/WatchEngineState streams the engine's state: its
//     lifetime id (instance_id, new each time an engine process starts),
//     healthy, server_status (STARTING, UP, UNHEALTHY) and is_pause. It only
//     pushes, so a frozen engine sends nothing; HealthCheck answers healthy
//     on request.
//   - GetServerInfo and GetModelInfo answer JSON objects as strings: the
//     server's arguments (served_model_name, model_path, context_length:
//     null when the model's own limit applies) and the model's (model_path,
//     tokenizer_path, is_generation). A missing key is not an error.
//   - Generate takes token ids only and streams the new output ids; the
//     message with finished true carries meta_info: prompt_tokens,
//     completion_tokens (decimal strings) and finish_reason, a JSON object
//     whose type is "stop", "length" or "abort". Abort ends a request by
//     rid.
//   - Embed (token ids) and TextEmbed (text) return one input's embedding,
//     with prompt_tokens in meta_info, from a model whose GetModelInfo
//     says is_generation false: the worker then accepts embed alone (no
//     generation request reaches it). They take no dimensions, which are
//     refused naming the field. Both layouts number them alike.
//   - Older servers (sglang.grpc.scheduler.SglangScheduler) serve only
//     grpc.health.v1: "" is liveness, the scheduler's service name
//     readiness (NOT_SERVING until the model is loaded, at shutdown, and
//     after 30 s of scheduler silence with requests pending); their Watch
//     sends one status and ends. They have no lifetime id.
//
// Mapping to vigil's availability, on the current API: UNHEALTHY, healthy
// false, a state stream that ends or fails, a snapshot with another
// instance id, HealthCheck failing --health-failures times in a row, or a
// reconnect to an engine with another instance id is Lost; is_pause is
// NotReady, and its clearing Serving again. Start waits until HealthCheck
// is healthy and a snapshot says UP and not paused. On an older server
// (engine option api=scheduler, or detected: SglangService answers
// UNIMPLEMENTED) vigil follows the lifecycle only: "" not serving is Lost,
// the scheduler's service NotReady, the connection closing Lost; requests
// need the current API.
//
// sglang.runtime.v1 has two layouts (engine option layout=auto, released or
// new). The released one (Dynamo's copy) numbers EngineStateSnapshot
// server_status 4, is_pause 5, model_info 6, server_info 7; the newer
// upstream one is_pause 4, model_info 5, server_info 6, without
// server_status (healthy stands for UP), and adds SamplingParams seed 16 and
// guided_decoding 17. Detection reads the first snapshot's wire form
// (layoutOf); a snapshot that fits both is read again until one tells.
// Penalties go to SamplingParams 5 to 7; a JSON schema or regex to 14 and 15
// on the released layout, to guided_decoding on the new one, which alone
// takes seed, choice, EBNF and structural tags. Stop strings, logit bias and
// json_object are refused: SGLang's gRPC server has no tokenizer, and no
// field for the others.
package sglang
