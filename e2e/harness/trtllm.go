package harness

// TRTLLM is TensorRT-LLM, stood in for by trtllm-mock. The mock takes the
// flags of every mock on enginemock.Command; TensorRT-LLM has no lifetime
// id, so its --instance-id names the mock in GET /state and reaches no
// client. vigil carries the adapter built in; there is no executable of
// its own for --engine-plugin.
var TRTLLM = Engine{
	Name:     "trtllm",
	Mock:     "trtllm-mock",
	MockPkg:  "github.com/vigilhq/vigil/plugins/trtllm/cmd/trtllm-mock",
	MockArgs: commandArgs,
}
