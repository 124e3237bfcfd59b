package sdktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Live is an adapter and an engine that is already serving, for Check:
// the conformance check of a built adapter, in any language, outside a Go
// test (vigil plugin check --conformance runs it).
type Live struct {
	// Name is the name Info must report, e.g. "vllm". Required.
	Name string
	// Command returns a new command that starts the adapter executable:
	// Check starts it with pluginhost.Launch, through go-plugin's handshake, for
	// each rule, and kills it after (the "executable" mode; the others
	// need TestEngine). Required.
	Command func() *exec.Cmd
	// EngineAddr is the serving engine's plaintext gRPC address,
	// host:port, which every rule that needs an engine starts the adapter
	// against (directly, or through the kit's proxy). Required.
	EngineAddr string
	// Options are the engine options every Start is given, as
	// Harness.Options.
	Options map[string]string
	// AdapterLog receives the executable's log lines (go-plugin's and the
	// adapter's, in hclog's format). Nil discards them.
	AdapterLog io.Writer
}

// Outcome is how one rule ended in one mode.
type Outcome int

// Outcomes of a rule.
const (
	// Passed: the rule held.
	Passed Outcome = iota + 1
	// Failed: the adapter broke the rule; Result.Log says how.
	Failed
	// Skipped: the rule was not judged, for the reason in Result.Log: a
	// hook that steers the engine (only a Go test with TestEngine can give
	// one), a capability the adapter does not claim, or the engine's stop.
	Skipped
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "PASS"
	case Failed:
		return "FAIL"
	case Skipped:
		return "SKIP"
	}
	return "UNKNOWN"
}

// Result is one rule's outcome in one mode, as Check reports it.
type Result struct {
	// Rule is the rule's name, as the package documentation lists it.
	Rule string
	// Mode is the mode the rule ran in: "executable" for Check.
	Mode    string
	Outcome Outcome
	// Log is what the rule said, a line an entry: each violation, what it
	// logged, the reason of a skip. A part of the rule run on its own
	// starts its lines with its name and a colon ("not ready: ...").
	Log []string
	// Elapsed is how long the rule took.
	Elapsed time.Duration
}

// Check runs the rules of TestEngine against l's adapter and the engine at
// l.EngineAddr, one at a time, in the "executable" mode, and calls
// report with each rule's Result as it ends. A rule that needs a hook
// (Harness.Fail, say) or shuts the engine down is skipped, naming what it
// needs, never passed; the kit's proxy still makes the engine slow and
// frozen for FrozenIsLost and SlowIsNotLost, and sees the aborts of
// GenerateCancel, GenerateSendError and Abort (which need Harness.Hold all
// the same). Every rule shares the one engine, so it must serve
// throughout.
//
// Check returns nil when no rule failed; an error naming the rules that
// failed; or an error naming the field of l that is missing, before any
// rule runs. When ctx ends, the rule under way fails and no other runs.
func Check(ctx context.Context, l Live, report func(Result)) error {
	c, err := l.config()
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range rules {
		for _, m := range modes {
			if !m.has(c) {
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("sdktest: checking %s: %w", l.Name, ctx.Err())
			}
			res := runRule(ctx, r, m, c)
			if res.Outcome == Failed {
				failed = append(failed, r.name+"/"+m.name)
			}
			report(res)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("sdktest: %s failed %s", l.Name, strings.Join(failed, ", "))
	}
	return nil
}

// config checks l and returns it as the rules' config: every Serving is
// the one engine, whose stop is unknown.
func (l Live) config() (config, error) {
	switch {
	case l.Name == "":
		return config{}, errors.New("sdktest: Live.Name is empty, want the name the adapter reports")
	case l.Command == nil:
		return config{}, errors.New("sdktest: Live.Command is nil, want the command that starts the adapter executable")
	case l.EngineAddr == "":
		return config{}, errors.New("sdktest: Live.EngineAddr is empty, want the serving engine's host:port")
	}
	log := l.AdapterLog
	if log == nil {
		log = io.Discard
	}
	return config{
		Name: l.Name, Command: l.Command, Executable: l.Command().Path, Options: l.Options,
		Serving:    func(tb) (string, func()) { return l.EngineAddr, nil },
		adapterLog: func(tb) io.Writer { return log },
	}, nil
}

// runRule runs r in mode m and returns its result.
func runRule(ctx context.Context, r rule, m mode, c config) Result {
	began := time.Now()
	t := newRunT(ctx, &runLog{}, "")
	t.run(func(t tb) { r.check(t, &kit{h: c, mode: m}) })
	return Result{Rule: r.name, Mode: m.name, Outcome: t.outcome(), Log: t.log.lines, Elapsed: time.Since(began)}
}

// runLog is the lines a rule and its parts logged.
type runLog struct {
	mu    sync.Mutex
	lines []string
}

// runT is Check's tb: it records what a rule says, and ends the rule's
// goroutine on Fatal and Skip, as *testing.T does.
type runT struct {
	ctx    context.Context
	cancel context.CancelFunc
	log    *runLog
	prefix string // "part: " of a part run with Run

	mu              sync.Mutex
	failed, skipped bool
	parts, skips    int // parts run with Run, and those skipped
	cleanups        []func()
}

func newRunT(ctx context.Context, log *runLog, prefix string) *runT {
	ctx, cancel := context.WithCancel(ctx)
	return &runT{ctx: ctx, cancel: cancel, log: log, prefix: prefix}
}

func (t *runT) Helper()                  {}
func (t *runT) Context() context.Context { return t.ctx }

func (t *runT) Log(args ...any) { t.add(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (t *runT) Logf(format string, args ...any) {
	t.add(fmt.Sprintf(format, args...))
}
func (t *runT) Error(args ...any)                 { t.Log(args...); t.fail() }
func (t *runT) Errorf(format string, args ...any) { t.Logf(format, args...); t.fail() }
func (t *runT) Fatal(args ...any)                 { t.Error(args...); runtime.Goexit() }
func (t *runT) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *runT) Skip(args ...any)                  { t.Log(args...); t.skip() }
func (t *runT) Skipf(format string, args ...any)  { t.Logf(format, args...); t.skip() }

func (t *runT) add(line string) {
	t.log.mu.Lock()
	defer t.log.mu.Unlock()
	t.log.lines = append(t.log.lines, t.prefix+line)
}

func (t *runT) fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *runT) skip() {
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *runT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *runT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// Run runs a part of the rule as its own, and reports whether it held.
func (t *runT) Run(name string, f func(t tb)) bool {
	part := newRunT(t.ctx, t.log, t.prefix+name+": ")
	part.run(f)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parts++
	if part.outcome() == Skipped {
		t.skips++
	}
	if part.Failed() {
		t.failed = true
	}
	return !part.Failed()
}

// outcome is how the rule ended: skipped when it or every part of it was.
func (t *runT) outcome() Outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.failed:
		return Failed
	case t.skipped, t.parts > 0 && t.skips == t.parts:
		return Skipped
	}
	return Passed
}

// run calls f on a goroutine of its own, which Fatal and Skip end, then
// the cleanups, last registered first, once t's context has ended.
func (t *runT) run(f func(t tb)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.recovered()
		f(t)
	}()
	<-done
	t.cancel()
	t.mu.Lock()
	cleanups := t.cleanups
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer t.recovered()
			cleanups[i]()
		}()
		<-done
	}
}

// recovered turns a panic of the rule's into a failure; deferred.
func (t *runT) recovered() {
	if r := recover(); r != nil {
		t.Errorf("sdktest: panic: %v", r)
	}
}
