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
		}},
		New: newEngine,
	}.Main()
}

func newEngine(c *cli.Context, cfg enginemock.Config) (*enginemock.Engine, []any, error) {
	mode, err := mock.ParseHealthMode(c.String("health-check"))
	if err != nil {
		return nil, nil, &enginemock.BadFlag{Name: "health-check", Value: c.String("health-check")}
	}
	e := mock.New(mock.Config{
		Model:            cfg.Model,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		Health:           mode,
	})
	return e.Engine, []any{"health_check", string(mode)}, nil
}
