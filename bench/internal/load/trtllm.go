package load

import (
	"context"

	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
	"google.golang.org/grpc"
)

// DirectTRTLLM sends Generate requests straight to a TensorRT-LLM engine
// (the mock), with the options vigil's TensorRT-LLM adapter sets. Tokens
// count as the adapter relays them: each chunk's new ones, then those of
// the complete message that no chunk carried.
func DirectTRTLLM(cc grpc.ClientConnInterface, maxTokens uint32) Request {
	c := trtllmpb.NewTrtllmServiceClient(cc)
	return func(ctx context.Context, id string) Outcome {
		stream, err := c.Generate(ctx, &trtllmpb.GenerateRequest{
			RequestId:      id,
			Tokenized:      &trtllmpb.TokenizedInput{InputTokenIds: prompt},
			SamplingConfig: &trtllmpb.SamplingConfig{},
			MaxTokens:      maxTokens,
			Streaming:      true,
		})
		if err != nil {
			return Outcome{Err: err}
		}
		sent := 0
		return drain(ctx, func() (int, error) {
			msg, err := stream.Recv()
			if ch := msg.GetChunk(); ch != nil {
				sent += len(ch.GetTokenIds())
				return len(ch.GetTokenIds()), err
			}
			return max(0, len(msg.GetComplete().GetOutputTokenIds())-sent), err
		})
	}
}
