package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
)

// figure is one benchmark figure of bench/README.md.
type figure struct {
	name, title string
	run         func(*env) ([]report.Row, error)
	// once: the figure measures what does not depend on the engine (the
	// router), and runs with the first engine alone.
	once bool
}

// figures in the order they run and print, each for every engine in turn.
// B4 shares B1's trials and B6's loaded memory reading comes from B5's
// 256-stream rows; each runs them itself when the other was not selected.
var figures = []figure{
	{"B1", "engine loss to withdrawn from discovery", figB1, false},
	{"B2", "engine ready again to registered in Consul", figB2, false},
	{"B3", "frozen engine (SIGSTOP) to withdrawn from Consul", figB3, false},
	{"B4", "engine loss to vigil's exit", figB4, false},
	{"B5", "request path through vigil against the engine directly", figB5, false},
	{"B6", "footprint: memory and start to registered", figB6, false},
	{"B7", "vigil route: throughput and withdrawal to no longer chosen", figB7, true},
	{"B8", "vigil route at 1,000 workers: churn, spread, peak-ewma vs least-outstanding vs round-robin", figB8, true},
	// The adapter's pings are go-plugin's, the same for every engine.
	{"B9", "frozen adapter (SIGSTOP) to withdrawn from Consul", figB9, true},
	{"B10", "busy engine, then frozen (SIGSTOP), to withdrawn from Consul", figB10, false},
	// The tokenizer module does not depend on the engine; its memory rows
	// run against the first engine's mock.
	{"B11", "tokenizer: encoding against @lenml/tokenizers, scaling, idle memory per family", figB11, true},
}

// benchEngine is an engine the bench measures: how the harness runs it
// (its mock and vigil's --engine), and B5's direct path to it.
type benchEngine struct {
	harness.Engine
	direct func(cc grpc.ClientConnInterface, maxTokens uint32) load.Request
	// stamped is direct reading the engine's token stamps (load.EnvStampTokens):
	// B5's one-hop path, against which vigil's added latency is measured.
	stamped func(cc grpc.ClientConnInterface, maxTokens uint32) load.Request
	// figures are the figures measured with the engine; nil for all.
	figures []string
	// pollInterval is vigil's --health-interval when the engine's health
	// is learnt by polling alone, 0 when the engine pushes it: a polled
	// engine that turns unhealthy is found at the next poll, so B1's and
	// B4's unhealthy cases are held to the interval plus their target.
	pollInterval time.Duration
}

// benchEngines are the engines -engines may name.
var benchEngines = []benchEngine{
	{Engine: harness.VLLM, direct: load.DirectVLLM, stamped: load.StampedVLLM},
	{Engine: harness.SGLang, direct: load.DirectSGLang, stamped: load.StampedSGLang},
	// B6's loaded memory comes from B5's rows, which run for it unreported.
	{Engine: harness.TRTLLM, direct: load.DirectTRTLLM, figures: []string{"B1", "B2", "B3", "B4", "B6", "B10"},
		pollInterval: defaultHealthInterval},
}

func engineNames() []string {
	out := make([]string, len(benchEngines))
	for i, e := range benchEngines {
		out[i] = e.Name
	}
	return out
}

func figureNames() []string {
	out := make([]string, len(figures))
	for i, f := range figures {
		out[i] = f.name
	}
	return out
}

// env is what the figures of one engine share: the engine, the harness,
// the Consul agent, the mode, and results that a later figure reuses.
type env struct {
	engine      benchEngine
	h           *harness.Harness
	root        string // the repository's root
	consul      *harness.Consul
	quick       bool
	prof        *profiler // -profile's, recording B5's step rows
	vigilEnv    []string  // -vigil-env's NAME=VALUE variables
	stepOnly    bool      // -b5-step-only
	registryDir string    // of this engine's trials alone

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

// startMock starts the engine's mock on grpcAddr (a fresh port when
// empty), extra flags after the harness's.
func (e *env) startMock(grpcAddr string, extra ...string) (*harness.Mock, error) {
	return e.h.StartMock(e.engine.Engine, grpcAddr, extra...)
}

// startVigil starts `vigil run` for the engine.
func (e *env) startVigil(o harness.VigilOpts) (*harness.Vigil, error) {
	o.Engine = e.engine.Name
	e.addVigilEnv(&o)
	return e.h.StartVigil(o)
}

// addVigilEnv gives o the -vigil-env variables, passing each on to the
// adapter too.
func (e *env) addVigilEnv(o *harness.VigilOpts) {
	for _, kv := range e.vigilEnv {
		name, _, _ := strings.Cut(kv, "=")
		o.Env = append(o.Env, kv)
		o.Extra = append(o.Extra, "--plugin-env", name)
	}
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
