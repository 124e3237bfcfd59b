package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// A stop signal in each startup phase ends the lifecycle cleanly (nil: exit
// 0), through the one unwind: the phase running is cancelled, an adapter
// that came up is killed, and discovery holds nothing when Run returns,
// not even a registration that landed during the drain.
func TestSignalInEachStartupPhase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(e *fakeEngine, c *Config) // holds the lifecycle in the phase
		line  string                         // logged once it is in the phase
		serve bool                           // and then the engine serves: registering
		from  State                          // the state the signal leaves for Draining
	}{
		{"adapter launching", func(_ *fakeEngine, c *Config) {
			launch := c.Launch
			c.Launch = func(ctx context.Context) (Adapter, error) {
				<-ctx.Done()
				return launch(ctx) // up all the same, as the stop came: killed
			}
		}, "starting engine adapter", false, StateLaunching},
		{"engine waiting", func(e *fakeEngine, _ *Config) { e.startBlock = make(chan struct{}) },
			"waiting for engine", false, StateWaiting},
		{"engine started, watch opening", func(*fakeEngine, *Config) {}, "engine serving", false, StateStarted},
		{"registering", func(*fakeEngine, *Config) {}, "engine serving", true, StateServing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			var reg *heldRegistry
			e := newFakeEngine()
			h := startHarnessOn(t, e, &fakeEndpoint{},
				func(r discovery.Registry) discovery.Registry { reg = newHeldRegistry(r); return reg },
				func(c *Config) { c.Logger = logs.logger(); tc.setup(e, c) })
			logs.await(t, tc.line)
			if tc.serve {
				h.send(sdk.Serving)
				<-reg.registering
			}
			h.signal()
			logs.await(t, "from="+tc.from.String()+" to=draining input=stop")
			close(reg.release) // a registration held until the drain began lands now
			if tc.serve {
				<-reg.landed
			}
			h.ended(nil)
			if recs := h.holds(); len(recs) != 0 {
				t.Errorf("discovery holds %+v after Run returned, want nothing", recs)
			}
		})
	}
}

// A drain that outlives its shutdown budget (here, requests in flight that
// ignore the end of the grace period) is abandoned: Run returns at the
// budget, with the loss that began the drain and ErrShutdownBudget.
func TestShutdownBudget(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	stuck := make(chan struct{})
	defer close(stuck)
	killed := make(chan struct{})
	cfg := Config{
		Launch: func(context.Context) (Adapter, error) {
			return Adapter{Engine: e, Version: 1, Kill: func() { close(killed) }}, nil
		},
		Registration: discovery.Registration{Service: "llm", WorkerID: "w1", Engine: "fake", Address: "127.0.0.1", Port: 1},
		Announcer:    discovery.NewAnnouncer(file.New(t.TempDir(), time.Minute), hclog.NewNullLogger()),
		Endpoint:     stuckEndpoint{fakeEndpoint: &fakeEndpoint{}, stuck: stuck},
		GracePeriod:  10 * time.Millisecond,
		Logger:       hclog.NewNullLogger(),
	}
	s := newSupervisor(cfg)
	s.budget = 100 * time.Millisecond
	out := make(chan error, 1)
	go func() { out <- s.run(context.Background(), make(chan os.Signal)) }()
	e.events <- sdk.Event{Availability: sdk.Serving}
	e.events <- sdk.Event{Availability: sdk.Lost, Reason: "gone"}
	select {
	case err := <-out:
		if !errors.Is(err, outcome.ErrShutdownBudget) || !errors.Is(err, outcome.ErrEngineLost) {
			t.Errorf("Run returned %v, want the loss and ErrShutdownBudget", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return at the budget")
	}
	<-killed
}

// stuckEndpoint's Drain ignores its context until stuck is closed.
type stuckEndpoint struct {
	*fakeEndpoint
	stuck chan struct{}
}

func (e stuckEndpoint) Drain(context.Context, time.Duration) error { <-e.stuck; return nil }

// A second signal abandons the drain of a failed startup, and the outcome
// stays the failure: an invalid configuration is still one.
func TestSecondSignalKeepsStartupFailure(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	e.startErr = sdk.ErrInvalidArgument
	shutdown := make(chan struct{})
	e.shutdownBlock = shutdown
	defer close(shutdown)
	h := startHarness(t, e, &fakeEndpoint{}, time.Second)
	<-e.shuttingDown
	h.signals <- syscall.SIGTERM
	err := h.exit()
	if !errors.Is(err, outcome.ErrConfig) || !errors.Is(err, outcome.ErrDrainCut) {
		t.Errorf("Run returned %v, want ErrConfig and ErrDrainCut", err)
	}
}

// An adapter that is not the one configured, or claims what it does not
// implement, ends the startup as a configuration error before anything is
// registered, and is killed.
func TestAdapterRefused(t *testing.T) {
	t.Parallel()
	refuse := fmt.Errorf("%w: the adapter reports another engine", outcome.ErrConfig)
	for _, tc := range []struct {
		name      string
		configure func(*fakeEngine, *Config)
		log       string
	}{
		{"refused by the check", func(_ *fakeEngine, c *Config) {
			c.CheckAdapter = func(info sdk.AdapterInfo) error {
				if info.Name != "fake" {
					t.Errorf("CheckAdapter given %+v, want the adapter's info", info)
				}
				return refuse
			}
		}, "reports another engine"},
		{"claims what it lacks", func(e *fakeEngine, _ *Config) {
			e.infoErr = fmt.Errorf("%w: the adapter claims Generate", sdk.ErrUnimplemented)
		}, "claims Generate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			e := newFakeEngine()
			h := startHarnessWith(t, e, &fakeEndpoint{}, func(c *Config) {
				c.Logger = logs.logger()
				tc.configure(e, c)
			})
			h.ended(outcome.ErrConfig)
			if line := logs.line("the engine adapter cannot be used"); !strings.Contains(line, tc.log) {
				t.Errorf("failure logged as %q, want it to hold %q", line, tc.log)
			}
			h.registered(false)
		})
	}
}

// With no engine name configured, the registration takes the adapter's.
func TestEngineNameFromAdapter(t *testing.T) {
	t.Parallel()
	h := startHarnessWith(t, newFakeEngine(), &fakeEndpoint{}, func(c *Config) { c.Registration.Engine = "" })
	h.send(sdk.Serving)
	h.registered(true)
	if rec := h.record(); rec.Engine != "fake" || rec.Meta["engine"] != "fake" {
		t.Errorf("registered engine %q, meta engine %q; want the adapter's name, fake", rec.Engine, rec.Meta["engine"])
	}
	h.signal()
	h.ended(nil)
}

// The shutdown budget's steps fit it: after the shutdown delay and the
// grace period, the cut and the adapter's Shutdown (one after the other,
// beside the rest of the withdrawal) and the adapter's kill take at most
// shutdownTail; the overdue timer leaves the kill its share.
func TestShutdownBudgetFitsSteps(t *testing.T) {
	t.Parallel()
	if steps := 2*stepTimeout + killShare; steps > shutdownTail {
		t.Errorf("cut + Shutdown + kill = %s, more than the tail %s", steps, shutdownTail)
	}
	if withdrawTail+killShare > shutdownTail {
		t.Errorf("withdrawTail %s + kill %s is more than the tail %s", withdrawTail, killShare, shutdownTail)
	}
	s := newSupervisor(Config{GracePeriod: 3 * time.Second, ShutdownDelay: time.Second})
	if got, want := s.shutdownBudget(time.Second), 3*time.Second+time.Second+2*time.Second; got != want {
		t.Errorf("shutdownBudget = %s, want grace + delay + 2s = %s", got, want)
	}
	if got, want := s.overdueAfter(time.Second), s.shutdownBudget(time.Second)-killShare; got != want {
		t.Errorf("overdueAfter = %s, want the budget less the kill's share, %s", got, want)
	}
}

// A step of the unwinding that does not finish within its bound is
// abandoned there: Run returns within the grace period + 2s, with
// ErrShutdownBudget beside why it stopped. A cut that fails otherwise (the
// engine answered the abort with an error) is only logged.
func TestUnfinishedStepsEndWithShutdownBudget(t *testing.T) {
	t.Parallel()
	errGone := errors.New("engine gone")
	for _, tc := range []struct {
		name   string
		setup  func(e *fakeEngine, ep *fakeEndpoint)
		loss   bool
		budget bool // Run's error wraps ErrShutdownBudget
	}{
		{"adapter Shutdown hangs", func(e *fakeEngine, _ *fakeEndpoint) { e.shutdownHang = make(chan struct{}) }, false, true},
		{"adapter Shutdown hangs after a loss", func(e *fakeEngine, _ *fakeEndpoint) { e.shutdownHang = make(chan struct{}) }, true, true},
		{"abort unanswered", func(_ *fakeEngine, ep *fakeEndpoint) {
			ep.release = make(chan struct{})
			ep.cutErr = fmt.Errorf("aborting 1 engine requests: %w", context.DeadlineExceeded)
		}, false, true},
		{"abort failed", func(_ *fakeEngine, ep *fakeEndpoint) {
			ep.release = make(chan struct{})
			ep.cutErr = fmt.Errorf("aborting 1 engine requests: %w", errGone)
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, ep := newFakeEngine(), &fakeEndpoint{}
			tc.setup(e, ep)
			if e.shutdownHang != nil {
				defer close(e.shutdownHang)
			}
			const grace = 100 * time.Millisecond
			h := startHarness(t, e, ep, grace)
			h.send(sdk.Serving)
			h.registered(true)
			began := time.Now()
			if tc.loss {
				h.send(sdk.Lost)
			} else {
				h.signal()
			}
			err := h.exit()
			if d := time.Since(began); d > grace+shutdownTail {
				t.Errorf("Run returned %s after the drain began, want within the grace period + %s", d, shutdownTail)
			}
			if got := errors.Is(err, outcome.ErrShutdownBudget); got != tc.budget {
				t.Errorf("Run returned %v: wraps ErrShutdownBudget %v, want %v", err, got, tc.budget)
			}
			if got := errors.Is(err, outcome.ErrEngineLost); got != tc.loss {
				t.Errorf("Run returned %v: wraps ErrEngineLost %v, want %v", err, got, tc.loss)
			}
			h.registered(false)
		})
	}
}

// An adapter that never answers WatchAvailability does not hold the
// lifecycle: a stop signal still drains and Run returns.
func TestWatchHangDoesNotHoldStop(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	e := newFakeEngine()
	e.watchHangs = true
	h := startHarnessWith(t, e, &fakeEndpoint{}, func(c *Config) { c.Logger = logs.logger() })
	logs.await(t, "engine serving")
	h.signal()
	h.ended(nil)
}

// stalledCtx is a context whose deadline has passed but whose timer has
// not run yet, as on a busy machine: Err nil, Done open.
type stalledCtx struct {
	context.Context
	deadline time.Time
}

func (c stalledCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// An adapter's error that arrives once a step's deadline has passed, before
// vigil's own timer has run (the adapter enforces the deadline it was sent:
// RST_STREAM CANCEL), is the step unanswered within its bound, so that the
// exit code is the shutdown budget's; before the deadline it is the
// adapter's answer.
func TestWithinPastDeadline(t *testing.T) {
	t.Parallel()
	rst := errors.New("stream terminated by RST_STREAM with error code: CANCEL")
	fail := func(context.Context) error { return rst }
	late := stalledCtx{context.Background(), time.Now().Add(-time.Millisecond)}
	if err := within(late, fail); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rst) {
		t.Errorf("within() after the deadline = %v, want it to wrap context.DeadlineExceeded and the adapter's error", err)
	}
	early := stalledCtx{context.Background(), time.Now().Add(time.Hour)}
	if err := within(early, fail); err != rst {
		t.Errorf("within() before the deadline = %v, want the adapter's error alone", err)
	}
}
