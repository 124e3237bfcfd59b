// Command vllm-mock runs a stand-in vLLM engine (package mock): gRPC on
// --listen, the JSON control surface on --control. It exits 0 after POST
// /stop, SIGTERM or SIGINT, 78 on bad flags and 1 on other errors. Its flags
// are enginemock.Command's and --health-watch.
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
		}},
		New: newEngine,
	}.Main()
}

func newEngine(c *cli.Context, cfg enginemock.Config) (*enginemock.Engine, []any, error) {
	mode, err := mock.ParseWatchMode(c.String("health-watch"))
	if err != nil {
		return nil, nil, &enginemock.BadFlag{Name: "health-watch", Value: c.String("health-watch")}
	}
	e := mock.New(mock.Config{
		Model:            cfg.Model,
		InstanceID:       cfg.InstanceID,
		StartupDelay:     cfg.StartupDelay,
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		WatchMode:        mode,
	})
	return e.Engine, []any{"health_watch", string(mode)}, nil
}
