// Command trtllm-mock runs a stand-in TensorRT-LLM engine (package mock):
// gRPC on --listen, the JSON control surface on --control. It exits 0 after
// POST /stop, SIGTERM or SIGINT, 78 on bad flags and 1 on other errors. Its
// flags are enginemock.Command's and --health-check; TensorRT-LLM has no
// lifetime id, so --instance-id only names the mock in its state.
package main

import (
	"github.com/urfave/cli/v2"

	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

func main() {
	enginemock.Command{
		Name:   "trtllm-mock",
		Usage:  "a stand-in TensorRT-LLM engine serving TensorRT-LLM's gRPC API",
		Serves: "trtllm.TrtllmService",
		Flags: []enginemock.Flag{{
			Flag:    &cli.StringFlag{Name: "health-check", Value: string(mock.HealthNormal), Usage: "HealthCheck's answer: normal, unhealthy (a crashed rank: forever, never exiting) or hang (`MODE`)"},
			Accepts: "one of normal, unhealthy, hang",
		}, {
			Flag:    &cli.UintFlag{Name: "max-seq-len", Value: uint(mock.MaxSeqLen), Usage: "GetModelInfo's max_seq_len, in tokens (`N`)"},
			Accepts: "a token count from 1 to 2147483647",
		}, {
			Flag:    &cli.UintFlag{Name: "max-input-len", Usage: "GetModelInfo's max_input_len, in tokens: longer prompts are refused (default: --max-seq-len) (`N`)"},
			Accepts: "a token count from 0 to 2147483647",
		}},
		New: newEngine,
	}.Main()
}

func newEngine(c *cli.Context, cfg enginemock.Config) (*enginemock.Engine, []any, error) {
	mode, err := mock.ParseHealthMode(c.String("health-check"))
	if err != nil {
		return nil, nil, &enginemock.BadFlag{Name: "health-check", Value: c.String("health-check")}
	}
	maxSeq, maxInput := c.Uint("max-seq-len"), c.Uint("max-input-len")
	if maxSeq < 1 || maxSeq > 1<<31-1 {
		return nil, nil, &enginemock.BadFlag{Name: "max-seq-len", Value: c.String("max-seq-len")}
	}
	if maxInput > 1<<31-1 {
		return nil, nil, &enginemock.BadFlag{Name: "max-input-len", Value: c.String("max-input-len")}
	}
	e := mock.New(mock.Config{
		Model:            cfg.Model,
		StartupDelay:     cfg.StartupDelay,
		MaxSeqLen:        uint32(maxSeq),
		MaxInputLen:      uint32(maxInput),
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		Health:           mode,
	})
	return e.Engine, []any{"health_check", string(mode)}, nil
}
