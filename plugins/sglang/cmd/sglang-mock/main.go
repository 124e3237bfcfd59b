// Command sglang-mock runs a stand-in SGLang engine (package mock): gRPC on
// --listen, the JSON control surface on --control. It exits 0 after POST
// /stop, SIGTERM or SIGINT, 78 on bad flags and 1 on other errors. Its flags
// are enginemock.Command's, --api, --layout, --context-length and
// --embedding;
// --instance-id takes a decimal uint64.
package main

import (
	"github.com/urfave/cli/v2"

	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

func main() {
	enginemock.Command{
		Name:   "sglang-mock",
		Usage:  "a stand-in SGLang engine serving SGLang's gRPC API",
		Serves: "sglang.runtime.v1.SglangService (or grpc.health.v1 with --api scheduler)",
		Flags: []enginemock.Flag{{
			Flag:    &cli.StringFlag{Name: "api", Value: string(mock.APIRuntime), Usage: "API served: runtime (sglang.runtime.v1) or scheduler (an older server's grpc.health.v1 only) (`API`)"},
			Accepts: "one of runtime, scheduler",
		}, {
			Flag:    &cli.StringFlag{Name: "layout", Value: string(mock.LayoutReleased), Usage: "sglang.runtime.v1 layout served: released (Dynamo's copy) or new (upstream's newer numbering, seed and guided_decoding) (`LAYOUT`)"},
			Accepts: "one of released, new",
		}, {
			Flag:    &cli.UintFlag{Name: "context-length", Usage: "context_length to report, in tokens; 0 reports null (`N`)"},
			Accepts: "a token count from 0",
		}, {
			Flag:    &cli.UintFlag{Name: "embedding", Usage: "serve an embedding model of this many dimensions (is_generation false, Embed and TextEmbed, Generate refused); 0 serves a generation model (`DIM`)"},
			Accepts: "a dimension count from 0",
		}},
		New: newEngine,
	}.Main()
}

func newEngine(c *cli.Context, cfg enginemock.Config) (*enginemock.Engine, []any, error) {
	api := mock.API(c.String("api"))
	if api != mock.APIRuntime && api != mock.APIScheduler {
		return nil, nil, &enginemock.BadFlag{Name: "api", Value: c.String("api")}
	}
	layout := mock.Layout(c.String("layout"))
	if layout != mock.LayoutReleased && layout != mock.LayoutNew {
		return nil, nil, &enginemock.BadFlag{Name: "layout", Value: c.String("layout")}
	}
	if id := cfg.InstanceID; id != "" {
		if _, err := mock.ParseInstanceID(id); err != nil {
			return nil, nil, &enginemock.BadFlag{Name: "instance-id", Value: id}
		}
	}
	e := mock.New(mock.Config{
		Model:            cfg.Model,
		InstanceID:       cfg.InstanceID,
		StartupDelay:     cfg.StartupDelay,
		ContextLength:    uint32(c.Uint("context-length")),
		TokenDelay:       cfg.TokenDelay,
		StepInterval:     cfg.StepInterval,
		TokensPerMessage: cfg.TokensPerMessage,
		ServerOptions:    cfg.ServerOptions,
		API:              api,
		Layout:           layout,
		EmbeddingDim:     int(c.Uint("embedding")),
	})
	return e.Engine, []any{"api", string(api), "layout", string(layout), "embedding", c.Uint("embedding")}, nil
}
