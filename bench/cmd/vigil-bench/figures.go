package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// figure is one benchmark figure of bench/README.md.
type figure struct {
	name, title string
	run         func(*env) ([]report.Row, error)
}

// figures in the order they run and print. B4 shares B1's trials and B6's
// loaded memory reading comes from B5's 256-stream rows; each runs them
// itself when the other was not selected.
var figures = []figure{
	{"B1", "engine loss to withdrawn from discovery", figB1},
	{"B2", "engine ready again to registered in Consul", figB2},
	{"B3", "frozen engine (SIGSTOP) to withdrawn from Consul", figB3},
	{"B4", "engine loss to vigil's exit", figB4},
	{"B5", "request path through vigil against the engine directly", figB5},
	{"B6", "footprint: memory and start to registered", figB6},
	{"B7", "vigil route: throughput and withdrawal to no longer chosen", figB7},
}

func figureNames() []string {
	out := make([]string, len(figures))
	for i, f := range figures {
		out[i] = f.name
	}
	return out
}

// env is what the figures of one engine share: the harness, the Consul
// agent, the mode, the engine, and results that a later figure reuses.
type env struct {
	h           *harness.Harness
	consul      *harness.Consul
	quick       bool
	engine      benchEngine
	registryDir string

	services int
	sections []report.Section

	loss        *lossResults       // B1's trials, for B4
	requestPath *requestPathResult // B5's rows, for B6
}

// trials is the full count, or 1 in quick mode.
func (e *env) trials(full int) int {
	if e.quick {
		return 1
	}
	return full
}

// pick is full, or quick in quick mode.
func (e *env) pick(full, quick time.Duration) time.Duration {
	if e.quick {
		return quick
	}
	return full
}

// service returns a service name no other trial of the run uses: a worker
// that was not deregistered lingers in Consul for a minute, and must not
// disturb the next trial's observer.
func (e *env) service(prefix string) string {
	e.services++
	return fmt.Sprintf("bench-%s-%s-%d", e.engine.Name, prefix, e.services)
}

// fileRegistry returns a fresh file registry directory.
func (e *env) fileRegistry() (string, error) {
	e.services++
	dir := filepath.Join(e.registryDir, fmt.Sprint(e.services))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("file registry: %w", err)
	}
	return dir, nil
}
