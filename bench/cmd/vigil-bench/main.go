// Command vigil-bench measures vigil as processes: it builds vigil and
// the mock of each engine it measures, starts a Consul dev agent on
// loopback ports of its own, runs the figures of bench/README.md (B1 to
// B11) for each engine (B7 and B8, the router's, B9, go-plugin's pings
// of the adapter, and B11, the tokenizer's, for the first alone), prints one
// table of figure, engine, metric, value and target, and writes results.md
// and results.json.
//
//	vigil-bench [-quick] [-out DIR] [-figures B1,B2,...] [-engines vllm,sglang,trtllm] [-profile] [-b5-step-only] [-vigil-env NAME=VALUE,...]
//
// Every process it starts is killed when it ends, on error, panic or
// SIGINT/SIGTERM too. Exit status: 0 when every figure was measured, 1
// when one failed (its row says why), 2 on bad flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// options are the driver's flags.
type options struct {
	quick    bool
	out      string
	figures  []string
	engines  []benchEngine
	profile  bool // perf profiles into out/profiles
	stepOnly bool
	// vigilEnv is added to the environment of every vigil and its adapter.
	vigilEnv []string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == observeCmd {
		os.Exit(observeMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == observeChurnCmd {
		os.Exit(observeChurnMain(os.Args[2:]))
	}
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		os.Exit(2)
	}
	os.Exit(run(opts))
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("vigil-bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "one short trial of each figure (B2's down time cut to 3s): checks the harness, measures little")
	out := fs.String("out", "", "directory for results.md and results.json (default: bench/ at the repository root)")
	figs := fs.String("figures", strings.Join(figureNames(), ","), "comma-separated figures to run")
	engs := fs.String("engines", strings.Join(engineNames(), ","), "comma-separated engines to measure, in order; B7 runs with the first")
	profile := fs.Bool("profile", false, "record perf CPU profiles of vigil (host and adapter) during the vigil path of each B5 step-mode row into -out's profiles/ (needs Linux perf and -out)")
	stepOnly := fs.Bool("b5-step-only", false, "run only B5's step-mode rows, the headline (B6 then has no memory figures)")
	vigilEnv := fs.String("vigil-env", "", "comma-separated NAME=VALUE variables for every vigil and its adapter (e.g. GOGC=200), to measure a setting")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q; vigil-bench takes flags only", fs.Arg(0))
	}
	if *profile && *out == "" {
		// The default -out is bench/ in the repository, which keeps no profiles.
		return options{}, fmt.Errorf("-profile needs -out DIR: the profiles are written to DIR/profiles")
	}
	o := options{quick: *quick, out: *out, profile: *profile, stepOnly: *stepOnly}
	if *vigilEnv != "" {
		for _, kv := range strings.Split(*vigilEnv, ",") {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				return options{}, fmt.Errorf("-vigil-env %q: want NAME=VALUE", kv)
			}
			o.vigilEnv = append(o.vigilEnv, kv)
		}
	}
	var err error
	if o.figures, err = pick("-figures", *figs, figureNames(), strings.ToUpper); err != nil {
		return options{}, err
	}
	names, err := pick("-engines", *engs, engineNames(), strings.ToLower)
	if err != nil {
		return options{}, err
	}
	for _, n := range names {
		o.engines = append(o.engines, benchEngines[slices.Index(engineNames(), n)])
	}
	return o, nil
}

// profiler is -profile's, or nil without it.
func (o options) profiler() *profiler {
	if !o.profile {
		return nil
	}
	return &profiler{dir: filepath.Join(o.out, "profiles")}
}

// pick reads a comma-separated list of names from known, normalised by
// norm, each once, in the order given.
func pick(flag, list string, known []string, norm func(string) string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = norm(strings.TrimSpace(n))
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%s: unknown name %q, want some of %s", flag, n, strings.Join(known, ","))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func run(opts options) int {
	began := time.Now()
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		return 1
	}
	var mocks []string
	engines := make([]harness.Engine, len(opts.engines))
	for i, e := range opts.engines {
		engines[i] = e.Engine
		mocks = append(mocks, e.Mock)
	}
	progress("building vigil and %s", strings.Join(mocks, ", "))
	h, err := harness.New(root, engines...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		return 1
	}
	// Deferred calls also run while a panic in this goroutine unwinds;
	// a panic elsewhere kills the driver, and Pdeathsig its children.
	defer h.Close()
	stopOnSignal(h)

	progress("starting Consul")
	consul, err := h.StartConsul()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		return 1
	}
	envs := make([]*env, len(opts.engines))
	res := report.Results{Machine: report.DescribeMachine(root), Quick: opts.quick, Figures: opts.figures, Notes: notes(opts.quick)}
	for i, be := range opts.engines {
		envs[i] = &env{engine: be, h: h, root: root, consul: consul, quick: opts.quick, prof: opts.profiler(), vigilEnv: opts.vigilEnv, stepOnly: opts.stepOnly, registryDir: filepath.Join(h.Dir, "registry", be.Name)}
		res.Engines = append(res.Engines, be.Name)
	}
	code := runFigures(envs, opts.figures, &res)
	res.Runtime = time.Since(began).Seconds()
	if opts.out == "" {
		opts.out = filepath.Join(root, "bench")
	}
	if err := output(opts.out, res); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		return 1
	}
	return code
}

// runFigures runs the selected figures in order, each for every engine in
// turn that it applies to (a figure that runs once for the first alone),
// into res, and returns 1 when one of them failed (its error is a row of
// the table), else 0. A failed figure does not stop the others.
func runFigures(envs []*env, names []string, res *report.Results) int {
	code := 0
	var cs []contention
	for _, f := range figures {
		if !slices.Contains(names, f.name) {
			continue
		}
		for i, e := range envs {
			if f.once && i > 0 {
				break
			}
			if !e.engine.measures(f.name) {
				continue
			}
			engine := e.engine.Name
			progress("%s, %s: %s", f.name, engine, f.title)
			m := startMeter()
			rows, err := f.run(e)
			c := m.stop(f.name, engine)
			cs = append(cs, c)
			if c.OtherShare > busyShare {
				progress("%s, %s: other processes took %.0f%% of the machine meanwhile", f.name, engine, 100*c.OtherShare)
			}
			if err != nil {
				rows = append(rows, report.ErrorRow(f.name, err))
				progress("%s, %s failed: %v", f.name, engine, err)
				code = 1
			}
			for i := range rows {
				rows[i].Engine = engine
			}
			res.Rows = append(res.Rows, rows...)
		}
	}
	for _, e := range envs {
		res.Sections = append(res.Sections, e.sections...)
	}
	res.Sections = append(res.Sections, contentionSection(cs))
	return code
}

// output prints the table on stdout and writes the results files.
func output(dir string, res report.Results) error {
	fmt.Println()
	if err := report.WriteTable(os.Stdout, res.Rows); err != nil {
		return err
	}
	if err := report.Write(dir, res); err != nil {
		return err
	}
	progress("wrote %s and %s in %.0fs", filepath.Join(dir, "results.md"), filepath.Join(dir, "results.json"), res.Runtime)
	return nil
}

// stopOnSignal kills every process the run started when the driver is
// interrupted, then exits.
func stopOnSignal(h *harness.Harness) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "\nvigil-bench: %s: stopping every process started\n", s)
		h.Close()
		os.Exit(130)
	}()
}

// progress reports what the driver is doing on stderr, keeping stdout for
// the table.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func notes(quick bool) []string {
	n := []string{
		"Times across processes are wall-clock (CLOCK_REALTIME) readings on one machine: the mock's recorded " +
			"health change, the driver's observers and the driver's kill and start calls.",
		"p99 is the nearest-rank percentile: with fewer than 100 trials it is the slowest trial.",
		"File-registry withdrawal is observed by polling the record's path every 1 ms (no inotify without a " +
			"dependency), so those figures carry up to about 1 ms of observer delay.",
		"CPU times come from utime+stime in /proc/PID/stat, in 10 ms ticks, read before and after each B5 row.",
		"B1 and B3 lose the engine 50 ms after the worker first appears in discovery, so the loss finds an idle worker " +
			"and the observers stay clear of a brief drop from Consul's passing list seen right after some registrations.",
	}
	if quick {
		n = append(n, "Quick run: one trial per figure and 1 s load rows; the numbers check the harness, they are not measurements.")
	}
	return n
}
