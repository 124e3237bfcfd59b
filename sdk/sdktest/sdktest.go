// Package sdktest checks an engine adapter against the [sdk.Engine]
// contract.
//
// An adapter's test calls [TestEngine] with a [Harness] that makes new
// adapters and starts engines for them to watch:
//
//	func TestConformance(t *testing.T) {
//		sdktest.TestEngine(t, sdktest.Harness{
//			Name:    "myengine",
//			New:     func() sdk.Engine { return myadapter.New() },
//			Serving: startMockEngine,
//		})
//	}
//
// TestEngine runs one subtest per rule, and each rule twice: on the Engine
// as New returns it ("direct"), and across the plugin boundary ("plugin",
// see [sdk.TestPluginEngine]), where errors have been through gRPC and must
// still wrap their class. A violation is reported with what was got and what
// was wanted; a call that does not return in time is reported, not waited
// for.
package sdktest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// Harness is what TestEngine needs from an adapter's test.
type Harness struct {
	// New returns a new, unstarted Engine. Required. TestEngine calls it
	// once per subtest and calls Shutdown on the Engine when the subtest
	// ends.
	New func() sdk.Engine

	// Serving starts an engine (a real one or a mock) that serves, and
	// returns its plaintext gRPC address as host:port. stop makes the
	// engine lost, for instance by stopping its server; TestEngine calls it
	// at most once, from its own goroutine, and waits for it to return.
	// Serving registers the engine's cleanup with t. Required.
	//
	// TestEngine runs its subtests one at a time, so Serving need not be
	// safe for concurrent use.
	Serving func(t *testing.T) (addr string, stop func())

	// Name is the name Info must report, e.g. "vllm". Required.
	Name string

	// Unnamed says the engine Serving starts reports no model name, as
	// some older engine servers do (vigil's --served-model-name names the
	// worker then): Start may return an empty ServedModelName.
	Unnamed bool
}

// Timings used by the checks.
const (
	// within bounds every wait for an Engine method or an event. It only
	// decides when a hung adapter is reported, so it is generous.
	within = 30 * time.Second
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

// mode is one way of calling the adapter.
type mode struct {
	name string
	wrap func(t *testing.T, e sdk.Engine) sdk.Engine
}

var modes = []mode{
	{"direct", func(_ *testing.T, e sdk.Engine) sdk.Engine { return e }},
	{"plugin", func(t *testing.T, e sdk.Engine) sdk.Engine { return sdk.TestPluginEngine(t, e) }},
}

// check is one rule of the contract. newEngine returns a new Engine in the
// subtest's mode.
type check struct {
	name string
	run  func(t *testing.T, h Harness, newEngine func() sdk.Engine)
}

var checks = []check{
	{"Info", checkInfo},
	{"StartInvalidAddress", checkStartInvalidAddress},
	{"WatchBeforeStart", checkWatchBeforeStart},
	{"Start", checkStart},
	{"StartTwice", checkStartTwice},
	{"StartupDeadline", checkStartupDeadline},
	{"StartCanceled", checkStartCanceled},
	{"WatchAvailability", checkWatchAvailability},
	{"WatchAvailabilityCancel", checkWatchAvailabilityCancel},
	{"ShutdownIdempotent", checkShutdownIdempotent},
}

// TestEngine checks the adapter that h.New makes against the sdk.Engine
// contract and reports every violation; see the package documentation.
func TestEngine(t *testing.T, h Harness) {
	t.Helper()
	switch {
	case h.New == nil:
		t.Fatal("sdktest: Harness.New is nil")
	case h.Serving == nil:
		t.Fatal("sdktest: Harness.Serving is nil")
	case h.Name == "":
		t.Fatal("sdktest: Harness.Name is empty")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					c.run(t, h, func() sdk.Engine { return newEngine(t, h, m) })
				})
			}
		})
	}
}

// newEngine returns a new Engine in mode m that is shut down when t ends.
func newEngine(t *testing.T, h Harness, m mode) sdk.Engine {
	t.Helper()
	impl := h.New()
	if impl == nil {
		t.Fatal("Harness.New() = nil, want an sdk.Engine")
	}
	e := m.wrap(t, impl)
	// Registered after the plugin pair's cleanup, so it runs before it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return e
}

func checkInfo(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	info, err := await(t, "Info", func() (sdk.AdapterInfo, error) { return e.Info(t.Context()) })
	if err != nil {
		t.Fatalf("Info() error = %v, want nil: Info must not need an engine", err)
	}
	if info.Name != h.Name {
		t.Errorf("Info() Name = %q, want %q", info.Name, h.Name)
	}
	if info.Version == "" {
		t.Error(`Info() Version = "", want a version`)
	}
}

func checkStartInvalidAddress(t *testing.T, _ Harness, newEngine func() sdk.Engine) {
	for _, addr := range []string{"", "no-port", "127.0.0.1:1:2"} {
		e := newEngine()
		// The short deadline makes an adapter that waits for such an
		// address fail with the wrong error, not hang.
		_, err := start(t, e, t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: shortDeadline, Health: health})
		if !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("Start(EngineAddr: %q) error = %v, want an error wrapping sdk.ErrInvalidArgument", addr, err)
		}
	}
}

func checkWatchBeforeStart(t *testing.T, _ Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	events, err := await(t, "WatchAvailability", func() (<-chan sdk.Event, error) { return e.WatchAvailability(t.Context()) })
	if !errors.Is(err, sdk.ErrNotStarted) {
		t.Errorf("WatchAvailability() before Start: error = %v, want an error wrapping sdk.ErrNotStarted", err)
	}
	if events != nil {
		t.Error("WatchAvailability() before Start returned a channel, want nil with the error")
	}
}

func checkStart(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr, _ := h.Serving(t)
	w, err := start(t, e, t.Context(), serving(addr))
	if err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", addr, err)
	}
	if w.ServedModelName == "" && !h.Unnamed {
		t.Errorf("Start(%s) Worker = %+v, want a non-empty ServedModelName", addr, w)
	}
}

func checkStartTwice(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr, _ := h.Serving(t)
	if _, err := start(t, e, t.Context(), serving(addr)); err != nil {
		t.Fatalf("first Start(%s) error = %v, want nil", addr, err)
	}
	if _, err := start(t, e, t.Context(), serving(addr)); !errors.Is(err, sdk.ErrAlreadyStarted) {
		t.Errorf("second Start(%s) error = %v, want an error wrapping sdk.ErrAlreadyStarted", addr, err)
	}
}

func checkStartupDeadline(t *testing.T, _ Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr := closedAddr(t)
	began := time.Now()
	_, err := start(t, e, t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: shortDeadline, Health: health})
	took := time.Since(began)
	if !errors.Is(err, sdk.ErrStartupDeadline) {
		t.Errorf("Start(%s, StartupDeadline: %v) with nothing listening: error = %v, want an error wrapping sdk.ErrStartupDeadline", addr, shortDeadline, err)
	}
	if took < shortDeadline {
		t.Errorf("Start gave up after %v, want it to wait the startup deadline %v", took, shortDeadline)
	}
}

func checkStartCanceled(t *testing.T, _ Harness, newEngine func() sdk.Engine) {
	// Nothing listens, so only the cancel can end Start before its hour.
	req := sdk.StartRequest{EngineAddr: closedAddr(t), StartupDeadline: time.Hour, Health: health}
	t.Run("before Start", func(t *testing.T) {
		e := newEngine()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := start(t, e, ctx, req); !errors.Is(err, context.Canceled) {
			t.Errorf("Start() with a cancelled ctx: error = %v, want an error wrapping context.Canceled", err)
		}
	})
	t.Run("while waiting", func(t *testing.T) {
		e := newEngine()
		ctx, cancel := context.WithCancel(t.Context())
		defer time.AfterFunc(100*time.Millisecond, cancel).Stop()
		if _, err := start(t, e, ctx, req); !errors.Is(err, context.Canceled) {
			t.Errorf("Start() cancelled while waiting for the engine: error = %v, want an error wrapping context.Canceled", err)
		}
	})
}

func checkWatchAvailability(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr, stop := h.Serving(t)
	if _, err := start(t, e, t.Context(), serving(addr)); err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", addr, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := watch(t, e, ctx)
	first, ok := receive(t, events, "the first event")
	if !ok {
		t.Fatal("availability channel closed before the first event, want a Serving event first")
	}
	if first.Availability != sdk.Serving {
		t.Fatalf("first event = %v (%q), want %v: Start has just seen the engine serve", first.Availability, first.Reason, sdk.Serving)
	}

	// stop may wait for the adapter's connections to end, which they do
	// when ctx ends, so it runs on its own and is waited for last.
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

	prev := first
	for i := 2; ; i++ {
		ev, ok := receive(t, events, "a Lost event after stop")
		if !ok {
			t.Fatalf("availability channel closed without a Lost event after stop, want Lost and then the close")
		}
		switch ev.Availability {
		case sdk.Serving, sdk.NotReady, sdk.Lost:
		default:
			t.Errorf("event %d = %v (%q), want Serving, NotReady or Lost", i, ev.Availability, ev.Reason)
		}
		if ev.Availability == prev.Availability {
			t.Errorf("event %d repeats %v (%q), want events only on change", i, ev.Availability, ev.Reason)
		}
		prev = ev
		if ev.Availability == sdk.Lost {
			break
		}
	}
	if ev, ok := receive(t, events, "the close after Lost"); ok {
		t.Errorf("event %v (%q) after Lost, want the channel closed", ev.Availability, ev.Reason)
	}
}

func checkWatchAvailabilityCancel(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr, _ := h.Serving(t)
	if _, err := start(t, e, t.Context(), serving(addr)); err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", addr, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := watch(t, e, ctx)
	if _, ok := receive(t, events, "the first event"); !ok {
		t.Fatal("availability channel closed before the first event, want a Serving event first")
	}
	cancel()
	for {
		ev, ok := receive(t, events, "the close after cancel")
		if !ok {
			return
		}
		if ev.Availability != sdk.Serving {
			t.Errorf("event %v (%q) after cancel with the engine serving, want only the channel closed", ev.Availability, ev.Reason)
		}
	}
}

func checkShutdownIdempotent(t *testing.T, h Harness, newEngine func() sdk.Engine) {
	e := newEngine()
	addr, _ := h.Serving(t)
	if _, err := start(t, e, t.Context(), serving(addr)); err != nil {
		t.Fatalf("Start(%s) error = %v, want nil", addr, err)
	}
	for _, which := range []string{"first", "second"} {
		if _, err := await(t, "Shutdown", func() (struct{}, error) { return struct{}{}, e.Shutdown(t.Context()) }); err != nil {
			t.Errorf("%s Shutdown() = %v, want nil", which, err)
		}
	}
}

// serving is the request TestEngine starts a Serving engine with.
func serving(addr string) sdk.StartRequest {
	return sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health}
}

// start calls Start, reporting a Start that does not return in time.
func start(t *testing.T, e sdk.Engine, ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	t.Helper()
	return await(t, "Start", func() (sdk.Worker, error) { return e.Start(ctx, req) })
}

// watch calls WatchAvailability and fails the test on an error.
func watch(t *testing.T, e sdk.Engine, ctx context.Context) <-chan sdk.Event {
	t.Helper()
	events, err := await(t, "WatchAvailability", func() (<-chan sdk.Event, error) { return e.WatchAvailability(ctx) })
	if err != nil {
		t.Fatalf("WatchAvailability() after Start: error = %v, want nil", err)
	}
	if events == nil {
		t.Fatal("WatchAvailability() after Start returned a nil channel and no error")
	}
	return events
}

// await runs f and returns its result, failing the test if f has not
// returned within the bound; f is then left running.
func await[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
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
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, within)
		panic("unreachable")
	}
}

// receive returns the next value from ch; ok is false when ch is closed.
// It fails the test if nothing comes within the bound.
func receive[T any](t *testing.T, ch <-chan T, what string) (v T, ok bool) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("no %s within %v", what, within)
		panic("unreachable")
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
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
