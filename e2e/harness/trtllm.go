package harness

import "fmt"

// TRTLLM is TensorRT-LLM, stood in for by trtllm-mock. TensorRT-LLM has no
// lifetime id: the mock's --instance-id names it in GET /state and reaches
// no client. vigil carries the adapter built in; there is no executable of
// its own for --engine-plugin.
var TRTLLM = Engine{
	Name:       "trtllm",
	Mock:       "trtllm-mock",
	MockPkg:    "github.com/vigilhq/vigil/plugins/trtllm/cmd/trtllm-mock",
	MockArgs:   kitMockArgs(),
	InstanceID: func(n int64) string { return fmt.Sprintf("inst-%d", n) },
}
