// Command vllm-mock runs a stand-in vLLM engine (package mock): gRPC on
// --listen, the JSON control surface on --control. It exits 0 after POST
// /stop, SIGTERM or SIGINT, 78 on bad flags and 1 on other errors. Its flags
// are enginemock.Command's, --health-watch, --max-model-len,
// --max-logprobs, --reasoning-parser and --tool-call-parser.
package main

import (
	"github.com/urfave/cli/v2"

	"github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

func main() {
	enginemock.Command{
		Name:   "vllm-mock",
		Usage:  "a stand-in vLLM engine serving vLLM's gRPC API",
		Serves: "vllm.Inference, vllm.Control, grpc.health.v1",
		Flags: []enginemock.Flag{{
			Flag:    &cli.StringFlag{Name: "health-watch", Value: string(mock.WatchNormal), Usage: "Health/Watch behaviour: normal, once, unimplemented or silent (`MODE`)"},
			Accepts: "one of normal, once, unimplemented, silent",
		}, {
			Flag:    &cli.UintFlag{Name: "max-model-len", Value: 4096, Usage: "ServerInfo.max_model_len, in tokens: longer prompts are refused as vLLM refuses them (`N`)"},
			Accepts: "a token count from 1",
		}, {
			Flag:    &cli.UintFlag{Name: "max-logprobs", Value: 20, Usage: "vLLM's --max-logprobs: more alternatives per position are refused as vLLM refuses them (`N`)"},
			Accepts: "a count from 1",
		}, {
			Flag:    &cli.StringFlag{Name: "reasoning-parser", Usage: "ModelInfo.reasoning_parser, as vLLM's --reasoning-parser reports it; the mock parses nothing (`NAME`)"},
			Accepts: "a parser name",
		}, {
			Flag:    &cli.StringFlag{Name: "tool-call-parser", Usage: "ModelInfo.tool_call_parser, as vLLM's --tool-call-parser reports it; the mock parses nothing (`NAME`)"},
			Accepts: "a parser name",
		}},
		New: newEngine,
	}.Main()
}

func newEngine(c *cli.Context, cfg enginemock.Config) (*enginemock.Engine, []any, error) {
	mode, err := mock.ParseWatchMode(c.String("health-watch"))
	if err != nil {
		return nil, nil, &enginemock.BadFlag{Name: "health-watch", Value: c.String("health-watch")}
	}
	maxLen := c.Uint("max-model-len")
	if maxLen < 1 || maxLen > 1<<32-1 {
		return nil, nil, &enginemock.BadFlag{Name: "max-model-len", Value: c.String("max-model-len")}
	}
	maxLogprobs := c.Uint("max-logprobs")
	if maxLogprobs < 1 || maxLogprobs > 1<<32-1 {
		return nil, nil, &enginemock.BadFlag{Name: "max-logprobs", Value: c.String("max-logprobs")}
	}
	e := mock.New(mock.Config{
		Model:            cfg.Model,
		InstanceID:       cfg.InstanceID,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		WatchMode:        mode,
		MaxModelLen:      uint32(maxLen),
		MaxLogprobs:      uint32(maxLogprobs),
		ReasoningParser:  c.String("reasoning-parser"),
		ToolCallParser:   c.String("tool-call-parser"),
	})
	return e.Engine, []any{"health_watch", string(mode), "max_model_len", maxLen, "max_logprobs", maxLogprobs,
		"reasoning_parser", c.String("reasoning-parser"), "tool_call_parser", c.String("tool-call-parser")}, nil
}
