// Command vigil-adapter-vllm is the vLLM adapter as a separate executable,
// the way third-party adapters ship: `vigil run --engine vllm
// --engine-plugin /path/to/vigil-adapter-vllm`. vigil also carries the same
// adapter built in.
package main

import (
	"github.com/vigilhq/vigil/plugins/vllm"
	"github.com/vigilhq/vigil/sdk"
)

func main() { sdk.Serve(vllm.New()) }
