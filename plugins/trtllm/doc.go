// Package trtllm is vigil's engine adapter for TensorRT-LLM: it implements
// sdk.Engine and sdk.Generator over TensorRT-LLM's gRPC API, on the sdk's
// adapterkit, and keeps only what is TensorRT-LLM's.
//
// The contract it relies on, as TensorRT-LLM serves it (NVIDIA/TensorRT-LLM,
// the gRPC server of package trtllm):
//
//   - No standard grpc.health.v1 service and no lifetime id: HealthCheck,
//     answering "OK" when healthy and a description otherwise, is the only
//     health signal. After a rank crash the server can stay up answering
//     unhealthy forever without exiting, so nothing restarts it unless
//     vigil acts.
//   - GetModelInfo gives model_id (often the model's path: there is no
//     separate served name) and max_seq_len; GetServerInfo the version.
//   - Generate takes token ids only and a required max_tokens; it streams
//     chunks of new token ids, then one complete message with every output
//     token, the finish reason ("stop", "length", "stop_word") and usage.
//     Abort ends a request by id.
//   - Past the basic subset (the SMG adapter's trtllm_service.proto): the
//     penalties and min_p in SamplingConfig, guided_decoding (applied only
//     with a non-empty guide; no choice type) and embedding_bias, one float
//     per token id of GetModelInfo's vocab_size, which logit_bias fills.
//
// Mapping to vigil's availability: HealthCheck is polled every health
// interval under the health timeout; anything but "OK", or a missed
// deadline, --health-failures times in a row is Lost. With no lifetime id
// to tell a restarted engine apart, the engine connection closing after
// Start is Lost at once. There is no not-ready state. Start waits until
// HealthCheck answers "OK". The served name is model_id unless vigil's
// --served-model-name gives another.
package trtllm
