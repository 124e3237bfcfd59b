// Package vllm is vigil's engine adapter for vLLM: it implements sdk.Engine
// and sdk.Generator over vLLM's gRPC API, on the sdk's adapterkit, and keeps
// only what is vLLM's: its health services, the worker information it
// reads, and the request and finish-reason mapping.
//
// The contract it relies on, as vLLM serves it (vllm-project/vllm, the gRPC
// server and its vllm.proto):
//
//   - Health is the standard grpc.health.v1.Health with the services
//     "vllm.Control", "vllm.Inference" and "" (the whole server). The server
//     listens before the model is loaded; "vllm.Control" and "vllm.Inference"
//     report SERVING once it can serve.
//   - "" turns NOT_SERVING only on engine failure or shutdown, never while
//     the engine is paused or asleep; on SIGTERM vLLM reports NOT_SERVING
//     first and then drains. When the engine-core process dies the server
//     reports NOT_SERVING about 2 s later and exits.
//   - In v0.33.0 "vllm.Inference" changes together with "". Later releases
//     make it follow readiness: NOT_SERVING while paused or asleep.
//   - vllm.Control/GetServerInfo gives the engine version, an instance id
//     that is new on every engine start, max_model_len and kv_block_size;
//     vllm.Control/GetModelInfo gives model_id and served_model_name.
//   - The server keeps gRPC's default keepalive enforcement, so the adapter
//     sends no keepalive pings and checks liveness with health Checks.
//
// Mapping to vigil's availability: "" other than SERVING, a failed health
// stream, an engine that stops answering Checks, or a reconnect to an engine
// with another instance id is Lost; "vllm.Inference" NOT_SERVING while ""
// serves is NotReady; both SERVING is Serving. Start waits for "",
// "vllm.Control" and "vllm.Inference" to serve, so nothing the watch takes
// for loss holds when it returns.
package vllm
