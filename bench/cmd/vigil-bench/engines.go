package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
)

// benchEngine is an engine the driver measures vigil with: its mock and
// adapter, the client that talks to it directly, and which figures apply.
type benchEngine struct {
	harness.Engine
	// direct sends B5's requests straight to the engine, as vigil's
	// adapter would.
	direct func(cc grpc.ClientConnInterface, maxTokens uint32) load.Request
	// figures are the figures measured with the engine; nil for all.
	figures []string
	// pollInterval is vigil's --health-interval when the engine's health
	// is learnt by polling alone, 0 when the engine pushes it: a polled
	// engine that turns unhealthy is found at the next poll, so B1's and
	// B4's unhealthy cases are held to the interval plus their target.
	pollInterval time.Duration
}

// defaultHealthInterval is vigil run's --health-interval default, which
// every figure runs with.
const defaultHealthInterval = 500 * time.Millisecond

// benchEngines are the engines the driver knows, in the order they run.
var benchEngines = []benchEngine{
	{Engine: harness.VLLM, direct: load.Direct},
	// B6's loaded memory comes from B5's rows, which run for it unreported.
	{Engine: harness.TRTLLM, direct: load.DirectTRTLLM, figures: []string{"B1", "B2", "B3", "B4", "B6"},
		pollInterval: defaultHealthInterval},
}

func engineNames() []string { return engineNamesOf(benchEngines) }

func engineNamesOf(bs []benchEngine) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

// parseEngines parses -engines: known names, comma-separated, each once,
// in the order given.
func parseEngines(list string) ([]benchEngine, error) {
	var out []benchEngine
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		i := slices.IndexFunc(benchEngines, func(b benchEngine) bool { return b.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("-engines: unknown engine %q, want some of %s", name, strings.Join(engineNames(), ","))
		}
		if !slices.ContainsFunc(out, func(b benchEngine) bool { return b.Name == name }) {
			out = append(out, benchEngines[i])
		}
	}
	return out, nil
}

// measures reports whether figure is measured with the engine.
func (b benchEngine) measures(figure string) bool {
	return b.figures == nil || slices.Contains(b.figures, figure)
}

// lossTarget is the target of a B1 or B4 row of case c: target, or for a
// polled engine's unhealthy case the poll interval plus target.
func (b benchEngine) lossTarget(c lossCase, prefix string, target time.Duration) string {
	if b.pollInterval == 0 || c.kill {
		return prefix + report.Dur(target)
	}
	return fmt.Sprintf("%s%s (interval + %s)", prefix, report.Dur(b.pollInterval+target), report.Dur(target))
}

// lossMetric names case c's row for the engine: a polled engine's
// unhealthy case says how often it is polled.
func (b benchEngine) lossMetric(c lossCase, metric string) string {
	if b.pollInterval == 0 || c.kill {
		return metric
	}
	return fmt.Sprintf("%s, health polled every %s", metric, report.Dur(b.pollInterval))
}
