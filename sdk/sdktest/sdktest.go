// Package sdktest checks an engine adapter against the contract written in
// package sdk ([sdk.Engine], [sdk.Generator], [sdk.Capabilities],
// [sdk.HealthPolicy]).
//
// An adapter's test calls [TestEngine] with a [Harness] that makes new
// adapters, starts engines for them to watch, and, through optional hooks,
// steers those engines:
//
//	func TestConformance(t *testing.T) {
//		sdktest.TestEngine(t, sdktest.Harness{
//			Name:    "myengine",
//			New:     func() sdk.Engine { return myadapter.New() },
//			Serving: startMockEngine,
//			Fail:    makeMockEngineFail,
//		})
//	}
//
// TestEngine runs one subtest per rule, named after it, and each rule in
// up to three modes: on the Engine as New returns it ("direct"); across
// go-plugin's in-memory pair ("plugin", see [sdk.TestPluginEngine]), where
// errors have been through gRPC and must still wrap their class; and
// against the built adapter executable, started with [pluginhost.Launch] through
// go-plugin's real handshake ("executable", see Harness.Executable). A
// violation is reported with what was got and what was wanted; a call that
// does not return in time is reported, not waited for. A rule that needs a
// hook the Harness lacks, a capability the adapter does not claim, or a
// mode without its input is skipped, saying which: never passed.
//
// The rules, each stated in package sdk's documentation, with the hooks
// they need in brackets:
//
//	Info                 Info answers with no engine; Name is Harness.Name; Version is set
//	StartInvalidAddress  an EngineAddr not host:port (port 1-65535): *FieldError for FieldEngineAddr
//	StartUnknownOption   an unknown engine option: *FieldError for FieldOptions naming the key
//	WatchBeforeStart     WatchAvailability before Start: ErrNotStarted
//	Start                Start returns once the engine serves, with a served model name
//	StartTwice           a second Start: ErrAlreadyStarted
//	StartupDeadline      nothing serving: ErrStartupDeadline once StartupDeadline passed, not long after
//	StartCanceled        ctx cancelled before or during Start, or past its deadline: ctx's error
//	FirstEventIsCurrent  the first event is the engine's state now: Serving, NotReady, Lost [NotReady, Fail]
//	StoppedIsLost        an engine that shuts down: Lost, then the close
//	FailedIsLost         an engine that reports failure: Lost, then the close [Fail]
//	FrozenIsLost         a frozen engine: Lost within Interval + Failures*Timeout + Timeout/4 (the kit freezes it)
//	SlowIsNotLost        an engine answering slowly, within Timeout: no event (the kit slows it)
//	BusyIsNotLost        health checks answering after Timeout, the transport at once: no Lost within BusyTimeout, at most 3 PINGs, no GOAWAY [CheckLatency]
//	NotReadyAndBack      an engine taking no work: NotReady, then Serving again [NotReady, Ready]
//	WatchCancel          the watch's ctx ending: the close, no event
//	ShutdownIdempotent   Shutdown twice: nil twice
//	Capabilities         Generate claimed: an sdk.Generator that forwards; Abort: with Generate, unknown ids ignored
//	Generate             two requests at once and one after: chunks of new output, none after the result, stop or length
//	GenerateIgnoreEOS    IgnoreEOS set: a generation to max tokens (length), or a refusal, ErrInvalidArgument starting "ignore_eos:"
//	GenerateRejected     text to an engine that takes token ids only: ErrInvalidArgument, no chunk
//	GenerateUnavailable  an engine stopped, not ready [NotReady] or refusing: ErrUnavailable, no chunk
//	GenerateCancel       ctx ending mid-generation: ctx's error, and the engine sees the abort [Hold]
//	GenerateSendError    send failing: send's error, and the engine sees the abort [Hold]
//	GenerateLogprobs     Logprobs asked as Worker.Accepts lists them: one per token id, the prompt's once, first Unknown, at most Top, sorted
//	Abort                Abort by id mid-generation: it ends, and the engine sees the abort [Hold]
//
// Only GenerateIgnoreEOS sets GenerateRequest.IgnoreEOS, which an engine
// may not honour: the other generation rules ask for a few tokens of a
// token-id prompt and nothing more.
//
// The engine sees an abort when each engine stream the generation opened
// (an HTTP/2 stream, one per gRPC call, through the kit's proxy at
// EngineAddr) is reset by either side or ended by the engine within 5 s:
// the adapter's abort call ended it, or the adapter closed it, which is
// the abort for an engine that has no abort call. With Harness.Aborted,
// the engine must also have seen an abort of the request's id.
//
// FrozenIsLost and SlowIsNotLost need no hook: they start the adapter with
// the address of a TCP proxy of the kit's, which delays every byte, or
// freezes, moving no byte either way while every connection stays open,
// as a stopped engine process looks to its clients. So an adapter reaches
// its engine only through EngineAddr.
//
// Every availability event a rule reads is also held to the rules of the
// stream: a known state, a change from the last one, a Time, NotReady only
// with Capabilities.Readiness, nothing after Lost, and no close without
// Lost unless the watch's ctx ended (across the plugin boundary: no Lost
// that the sdk sent for the adapter, with reason sdk.ReasonStreamEnded).
//
// TestEngine runs its rules one at a time, and starts a fresh adapter and
// engine for each rule and mode.
//
// [Check] runs the same rules outside a Go test, against a built adapter
// executable (in any language) and one engine already serving, with no
// hooks: vigil plugin check --conformance is built on it.
package sdktest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// Harness is what TestEngine needs from an adapter's test: the adapter, in
// process or built, an engine for it, and optional hooks that steer that
// engine. Every hook acts on the engine Serving started at addr and
// registers any cleanup with t; TestEngine calls hooks from the subtest's
// goroutine.
type Harness struct {
	// Name is the name Info must report, e.g. "vllm". Required.
	Name string

	// New returns a new, unstarted Engine for the "direct" and "plugin"
	// modes. TestEngine calls it once per subtest and calls Shutdown on the
	// Engine when the subtest ends. Nil skips both modes, for an adapter
	// that is only an executable. New or Executable is required.
	New func() sdk.Engine

	// Executable is the path of the built adapter executable for the
	// "executable" mode: TestEngine starts it with pluginhost.Launch, through
	// go-plugin's handshake, once per subtest, and kills it when the
	// subtest ends; its log reaches the test log. Empty skips the mode. A
	// test binary can stand in for the executable: see ServeAdapter.
	Executable string

	// Serving starts an engine (a real one or a mock) that serves, and
	// returns its plaintext gRPC address as host:port. stop makes the
	// engine lost by shutting it down, as the engine does on SIGTERM;
	// TestEngine calls it at most once, from its own goroutine, and waits
	// for it to return; a nil stop skips the rules that stop the engine
	// (StoppedIsLost, GenerateUnavailable's "stopped"). Serving registers
	// the engine's cleanup with t. Required.
	//
	// TestEngine runs its subtests one at a time, so Serving and the hooks
	// need not be safe for concurrent use.
	Serving func(t *testing.T) (addr string, stop func())

	// Unnamed says the engine Serving starts reports no model name, as
	// some older engine servers do (vigil's --served-model-name names the
	// worker then): Start may return an empty ServedModelName.
	Unnamed bool

	// GenerateUnavailable says the engine Serving starts takes no
	// generation requests, as some older engine servers do: Generate must
	// fail with sdk.ErrUnavailable, and the rules that need a generation
	// are skipped.
	GenerateUnavailable bool

	// Fail makes the engine report that it failed (its liveness signal
	// NOT_SERVING, say) while its process keeps running. For
	// FirstEventIsCurrent and FailedIsLost.
	Fail func(t *testing.T, addr string)

	// NotReady makes the engine alive but not accepting work (asleep,
	// paused); Ready undoes it. For adapters with Capabilities.Readiness:
	// FirstEventIsCurrent, NotReadyAndBack and GenerateUnavailable.
	NotReady func(t *testing.T, addr string)
	Ready    func(t *testing.T, addr string)

	// Hold makes the engine hold every generation it starts from now on
	// after its first output token, until the generation is aborted or t
	// ends, so that a rule can end it from outside. For GenerateCancel,
	// GenerateSendError and Abort.
	Hold func(t *testing.T, addr string)

	// Aborted returns a channel that is closed once the engine has seen an
	// abort of requestID (an Abort call naming it), whenever that comes.
	// Optional: without it GenerateCancel, GenerateSendError and Abort
	// judge the abort by the engine streams alone (see the package
	// documentation), as for an engine that takes its stream's close for
	// the abort.
	Aborted func(t *testing.T, addr, requestID string) <-chan struct{}

	// CheckLatency makes the engine's health checks answer d late (0: at
	// once again) while its process and HTTP/2 transport run on, as an
	// engine stalled by a long prefill: for BusyIsNotLost, which an adapter
	// that tells busy from frozen (sdk.HealthPolicy.BusyTimeout; every
	// adapter on the adapterkit) must pass.
	CheckLatency func(t *testing.T, addr string, d time.Duration)

	// Options are the engine options (vigil's --engine-option) every Start
	// the kit makes is given, for an adapter that needs some with this
	// engine. Nil: none.
	Options map[string]string
}

// config is what the rules run with: a Harness, or Check's Live, with
// hooks that take the kit's tb.
type config struct {
	Name                         string
	New                          func() sdk.Engine
	Executable                   string           // names the executable in messages
	Command                      func() *exec.Cmd // nil: no executable mode
	Unnamed, GenerateUnavailable bool
	Options                      map[string]string

	Serving                     func(t tb) (addr string, stop func())
	Fail, NotReady, Ready, Hold func(t tb, addr string)
	Aborted                     func(t tb, addr, requestID string) <-chan struct{}
	CheckLatency                func(t tb, addr string, d time.Duration)

	// adapterLog is where the executable's log goes; nil: the test log.
	adapterLog func(t tb) io.Writer
}

// config turns h's hooks into the kit's: each is called with the
// *testing.T under the kit's tb.
func (h Harness) config() config {
	c := config{Name: h.Name, New: h.New, Executable: h.Executable, Unnamed: h.Unnamed,
		GenerateUnavailable: h.GenerateUnavailable, Options: h.Options}
	if h.Executable != "" {
		c.Command = func() *exec.Cmd { return exec.Command(h.Executable) }
	}
	c.Serving = func(t tb) (string, func()) { return h.Serving(testingOf(t)) }
	hook := func(f func(*testing.T, string)) func(tb, string) {
		if f == nil {
			return nil
		}
		return func(t tb, addr string) { f(testingOf(t), addr) }
	}
	c.Fail, c.NotReady, c.Ready, c.Hold = hook(h.Fail), hook(h.NotReady), hook(h.Ready), hook(h.Hold)
	if h.Aborted != nil {
		c.Aborted = func(t tb, addr, id string) <-chan struct{} { return h.Aborted(testingOf(t), addr, id) }
	}
	if h.CheckLatency != nil {
		c.CheckLatency = func(t tb, addr string, d time.Duration) { h.CheckLatency(testingOf(t), addr, d) }
	}
	return c
}

// hooks maps each hook's name to whether the config has it.
func (h config) hooks() map[string]bool {
	return map[string]bool{
		"Fail":         h.Fail != nil,
		"NotReady":     h.NotReady != nil,
		"Ready":        h.Ready != nil,
		"Hold":         h.Hold != nil,
		"Aborted":      h.Aborted != nil,
		"CheckLatency": h.CheckLatency != nil,
	}
}

// Timings used by the checks.
const (
	// within bounds every wait for an Engine method or an event. It only
	// decides when a hung adapter is reported, so it is generous.
	within = 30 * time.Second
	// promptly bounds what the contract wants soon: Generate returning
	// after its ctx ends or send fails, the engine seeing an abort.
	promptly = 5 * time.Second
	// slack is what a loaded machine may add to a bound the contract
	// states exactly, such as the startup deadline.
	slack = 2 * time.Second
	// shortDeadline is the startup deadline of the StartupDeadline check.
	shortDeadline = 300 * time.Millisecond
)

// health is the policy TestEngine starts engines with: frequent checks, so
// that a lost engine is noticed within a second or two whatever stop does.
var health = sdk.HealthPolicy{
	Interval: 50 * time.Millisecond,
	Timeout:  time.Second,
	Failures: 2,
	RetryMax: 50 * time.Millisecond,
}

// mode is one way of calling the adapter: engine returns a new Engine that
// is shut down when t ends, or skips t when h lacks what the mode needs.
type mode struct {
	name   string
	engine func(t tb, h config) sdk.Engine
	// has says whether h has what the mode needs.
	has func(h config) bool
}

var modes = []mode{
	{"direct", func(t tb, h config) sdk.Engine { return inProcess(t, h, false) }, hasNew},
	{"plugin", func(t tb, h config) sdk.Engine { return inProcess(t, h, true) }, hasNew},
	{"executable", launched, func(h config) bool { return h.Command != nil }},
}

func hasNew(h config) bool { return h.New != nil }

// rule is one rule of the contract, checked in one mode.
type rule struct {
	name  string
	check func(t tb, k *kit)
}

var rules = []rule{
	{"Info", checkInfo},
	{"StartInvalidAddress", checkStartInvalidAddress},
	{"StartUnknownOption", checkStartUnknownOption},
	{"WatchBeforeStart", checkWatchBeforeStart},
	{"Start", checkStart},
	{"StartTwice", checkStartTwice},
	{"StartupDeadline", checkStartupDeadline},
	{"StartCanceled", checkStartCanceled},
	{"FirstEventIsCurrent", checkFirstEventIsCurrent},
	{"StoppedIsLost", checkStoppedIsLost},
	{"FailedIsLost", checkFailedIsLost},
	{"FrozenIsLost", checkFrozenIsLost},
	{"SlowIsNotLost", checkSlowIsNotLost},
	{"BusyIsNotLost", checkBusyIsNotLost},
	{"NotReadyAndBack", checkNotReadyAndBack},
	{"WatchCancel", checkWatchCancel},
	{"ShutdownIdempotent", checkShutdownIdempotent},
	{"Capabilities", checkCapabilities},
	{"Generate", checkGenerate},
	{"GenerateIgnoreEOS", checkGenerateIgnoreEOS},
	{"GenerateRejected", checkGenerateRejected},
	{"GenerateUnavailable", checkGenerateUnavailable},
	{"GenerateCancel", checkGenerateCancel},
	{"GenerateSendError", checkGenerateSendError},
	{"GenerateLogprobs", checkGenerateLogprobs},
	{"Abort", checkAbort},
}

// TestEngine checks the adapter that h describes against the contract
// written in package sdk and reports every violation, one subtest per rule
// and mode; see the package documentation.
func TestEngine(t *testing.T, h Harness) {
	t.Helper()
	switch {
	case h.New == nil && h.Executable == "":
		t.Fatal("sdktest: Harness.New is nil and Harness.Executable empty, want the adapter in one of them")
	case h.Serving == nil:
		t.Fatal("sdktest: Harness.Serving is nil")
	case h.Name == "":
		t.Fatal("sdktest: Harness.Name is empty")
	}
	c := h.config()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					r.check(testingT{t}, &kit{h: c, mode: m})
				})
			}
		})
	}
}

// inProcess returns a new Engine from h.New, called directly or across
// go-plugin's in-memory pair, shut down when t ends.
func inProcess(t tb, h config, plugin bool) sdk.Engine {
	t.Helper()
	if h.New == nil {
		t.Skip("Harness.New is nil: no adapter in process")
	}
	e := h.New()
	if e == nil {
		t.Fatal("Harness.New() = nil, want an sdk.Engine")
	}
	if plugin {
		e = sdk.TestPluginEngine(testingOf(t), e)
	}
	shutdownAtEnd(t, e)
	return e
}

// shutdownAtEnd calls e's Shutdown when t ends: registered after the plugin
// pair's or the process's cleanup, so it runs before it.
func shutdownAtEnd(t tb, e sdk.Engine) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
}

// kit is what a rule checks with: the harness and the subtest's mode.
type kit struct {
	h    config
	mode mode
}

// engine returns a new Engine in the subtest's mode.
func (k *kit) engine(t tb) sdk.Engine {
	t.Helper()
	return k.mode.engine(t, k.h)
}

// need skips t unless the Harness has every hook named.
func (k *kit) need(t tb, hooks ...string) {
	t.Helper()
	have := k.h.hooks()
	var missing []string
	for _, name := range hooks {
		if !have[name] {
			missing = append(missing, "Harness."+name)
		}
	}
	if len(missing) > 0 {
		t.Skipf("needs hook %s", strings.Join(missing, ", "))
	}
}

// info calls Info and fails t on an error.
func (k *kit) info(t tb, e sdk.Engine) sdk.AdapterInfo {
	t.Helper()
	info, err := await(t, "Info", func() (sdk.AdapterInfo, error) { return e.Info(t.Context()) })
	if err != nil {
		t.Fatalf("Info() error = %v, want nil", err)
	}
	return info
}

// needReadiness skips t unless the adapter claims Capabilities.Readiness.
func (k *kit) needReadiness(t tb, e sdk.Engine) {
	t.Helper()
	if !k.info(t, e).Capabilities.Readiness {
		t.Skip("Capabilities.Readiness is false: the adapter reports no NotReady")
	}
}

// serving starts an engine with h.Serving.
func (k *kit) serving(t tb) (addr string, stop func()) {
	t.Helper()
	return k.h.Serving(t)
}

// needStop skips t unless the engine's stop is known.
func needStop(t tb, stop func()) {
	t.Helper()
	if stop == nil {
		t.Skip("needs the engine's stop from Harness.Serving: the rule shuts the engine down")
	}
}

// started starts e against the serving engine at addr and fails t if Start
// fails.
func (k *kit) started(t tb, e sdk.Engine, addr string) sdk.Worker {
	t.Helper()
	w, err := start(t, e, t.Context(), k.startRequest(addr))
	if err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", addr, err)
	}
	return w
}

// stopInBackground calls stop on its own goroutine: it may wait for the
// adapter's connections to end, which they do once the adapter sees the
// loss. It is waited for when t ends; the channel closes once stop returns.
func stopInBackground(t tb, stop func()) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stop()
	}()
	t.Cleanup(func() {
		select {
		case <-stopped:
		case <-time.After(within):
			t.Errorf("the harness's stop did not return within %v", within)
		}
	})
	return stopped
}

// startRequest is the request the kit starts a Serving engine with.
func (k *kit) startRequest(addr string) sdk.StartRequest {
	return sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health, Options: k.h.Options}
}

// start calls Start, reporting a Start that does not return in time.
func start(t tb, e sdk.Engine, ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	t.Helper()
	return await(t, "Start", func() (sdk.Worker, error) { return e.Start(ctx, req) })
}

// await runs f and returns its result, failing the test if f has not
// returned within the bound; f is then left running.
func await[T any](t tb, what string, f func() (T, error)) (T, error) {
	t.Helper()
	return awaitFor(t, within, what, f)
}

// awaitFor is await with bound d.
func awaitFor[T any](t tb, d time.Duration, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

// receive returns the next value from ch; ok is false when ch is closed.
// It fails the test if nothing comes within d.
func receive[T any](t tb, ch <-chan T, d time.Duration, what string) (v T, ok bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t tb) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	return addr
}

// requests numbers the request ids the kit sends, so each is unique.
var requests atomic.Int64

// newRequestID returns a request id not used before, by this process or,
// with its pid, another one testing against the same engine.
func newRequestID() string { return fmt.Sprintf("sdktest-%d-%d", os.Getpid(), requests.Add(1)) }
