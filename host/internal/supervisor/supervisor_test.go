package supervisor

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// A worker's life: registered while serving, withdrawn while not ready
// (vigil stays), registered again, then lost: withdrawn and exit 1.
func TestLifecycleServingNotReadyLost(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{}
	h := startHarness(t, newFakeEngine(), ep, time.Second)

	h.send(sdk.Serving)
	h.registered(true)
	if !ep.Serving() {
		t.Error("endpoint not admitting while the engine serves")
	}
	h.send(sdk.NotReady)
	h.registered(false)
	if ep.Serving() {
		t.Error("endpoint admitting while the engine is not ready")
	}
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.ended(outcome.ErrEngineLost)
	h.registered(false)
}

// A stop signal drains and exits 0; an engine loss after it does not change
// the code.
func TestLifecycleSignalThenLoss(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})}
	h := startHarness(t, newFakeEngine(), ep, 10*time.Second)
	h.send(sdk.Serving)
	h.registered(true)
	h.signal()
	h.registered(false) // withdrawn at once, while requests are still in flight
	h.send(sdk.Lost)
	close(ep.release)
	h.ended(nil)
}

// Loss first, then a signal: the loss decides, exit 1.
func TestLifecycleLossThenSignal(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})}
	h := startHarness(t, newFakeEngine(), ep, 10*time.Second)
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.registered(false)
	close(ep.release)
	h.ended(outcome.ErrEngineLost)
}

// A second signal during the drain exits at once.
func TestLifecycleSecondSignal(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})} // never released
	h := startHarness(t, newFakeEngine(), ep, time.Hour)
	h.send(sdk.Serving)
	h.registered(true)
	h.signal()
	h.registered(false)
	h.signal()
	h.ended(outcome.ErrDrainCut)
}

// The drain ends at the grace period even when requests never finish.
func TestLifecycleGracePeriodBoundsDrain(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})} // never released
	h := startHarness(t, newFakeEngine(), ep, 100*time.Millisecond)
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.ended(outcome.ErrEngineLost)
}

// A signal during the startup wait cancels Start and exits 0 with nothing
// registered.
func TestLifecycleSignalDuringStartup(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	e.startBlock = make(chan struct{})
	h := startHarness(t, e, &fakeEndpoint{}, time.Second)
	ctx := <-e.startCtx
	h.signal()
	h.ended(nil)
	if ctx.Err() == nil {
		t.Error("Start's context was not cancelled")
	}
	h.registered(false)
}

// Start failing ends the lifecycle for the startup deadline, for any engine
// error, or for an invalid configuration when the adapter rejects its
// configuration: restarting would not help.
func TestLifecycleStartFails(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"deadline": {fmt.Errorf("%w: engine did not serve", sdk.ErrStartupDeadline), outcome.ErrStartupDeadline},
		"engine":   {fmt.Errorf("%w: reading server info", sdk.ErrUnavailable), sdk.ErrUnavailable},
		"config":   {fmt.Errorf("%w: engine option \"x\"", sdk.ErrInvalidArgument), outcome.ErrConfig},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEngine()
			e.startErr = tc.err
			h := startHarness(t, e, &fakeEndpoint{}, time.Second)
			h.ended(tc.want)
			h.registered(false)
		})
	}
}

// The availability stream closing without Lost (the adapter died) is a loss.
func TestLifecycleStreamClosed(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	h := startHarness(t, e, &fakeEndpoint{}, time.Second)
	h.send(sdk.Serving)
	h.registered(true)
	close(e.events)
	h.ended(outcome.ErrEngineLost)
	h.registered(false)
}

// A signal while the adapter is still starting exits 0 at once, and the
// launch is cancelled.
func TestLifecycleSignalDuringLaunch(t *testing.T) {
	t.Parallel()
	h := &harness{t: t, signals: make(chan os.Signal, 1), out: make(chan error, 1), killed: make(chan struct{})}
	launched := make(chan context.Context, 1)
	cfg := Config{
		Launch: func(ctx context.Context) (Adapter, error) {
			launched <- ctx
			<-ctx.Done()
			return Adapter{}, ctx.Err()
		},
		Logger: hclog.NewNullLogger(),
	}
	go func() { h.out <- Run(context.Background(), cfg, h.signals) }()
	ctx := <-launched
	h.signals <- syscall.SIGTERM
	if err := <-h.out; err != nil {
		t.Errorf("Run returned %v, want nil", err)
	}
	if ctx.Err() == nil {
		t.Error("the launch was not cancelled")
	}
}

// With a shutdown delay, a stop withdraws at once but keeps admitting until
// the delay has passed; an engine loss during the delay ends it at once.
func TestLifecycleShutdownDelay(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{}
	h := startHarnessDelay(t, newFakeEngine(), ep, time.Second, time.Hour)
	h.send(sdk.Serving)
	h.registered(true)
	h.signal()
	h.registered(false)
	if !ep.Serving() {
		t.Error("endpoint stopped admitting during the shutdown delay")
	}
	h.send(sdk.Lost)
	if err := h.exit(); err != nil {
		t.Errorf("Run returned %v, want nil (the stop came first)", err)
	}
	if ep.Serving() {
		t.Error("endpoint still admitting after the drain")
	}
}

// --served-model-name: the override replaces the engine's served model name
// in what the endpoint checks requests against, in the registration and in
// the "engine serving" line, which also names the engine's own; the model
// id stays the engine's. Without it, the engine's name is used throughout.
func TestServedModelName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, override       string
		wantModel, wantLog   string
		wantEngineNameLogged bool
	}{
		{"override", "alias", "alias", "model=alias", true},
		{"engine's own", "", "m", "model=m", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep := &fakeEndpoint{}
			engine := newFakeEngine() // reports served name "m", model id "org/m"
			engine.generate = true
			var logs logBuffer
			h := startHarnessWith(t, engine, ep, func(c *Config) {
				c.ServedModelName = tc.override
				c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
			})
			h.send(sdk.Serving)
			h.registered(true)

			w := ep.Attached()
			if w == nil {
				t.Fatal("Run did not attach the engine to the endpoint")
			}
			if w.ServedModelName != tc.wantModel || w.ModelID != "org/m" {
				t.Errorf("endpoint's worker: served model name %q, model id %q; want %q, org/m", w.ServedModelName, w.ModelID, tc.wantModel)
			}
			if rec := h.record(); rec.Model != tc.wantModel || rec.ModelID != "org/m" || rec.Meta["model"] != tc.wantModel {
				t.Errorf("registration: model %q, model_id %q, meta model %q; want %q, org/m, %q", rec.Model, rec.ModelID, rec.Meta["model"], tc.wantModel, tc.wantModel)
			} else if rec.Meta["max_model_len"] != "4096" {
				t.Errorf("registration: meta max_model_len %q, want the engine's 4096 (vigil route's /v1/models gives it)", rec.Meta["max_model_len"])
			}
			line := logs.line("engine serving")
			if !strings.Contains(line, tc.wantLog+" ") || !strings.Contains(line, "model_id=org/m") {
				t.Errorf("log line %q, want %s and model_id=org/m", line, tc.wantLog)
			}
			if got := strings.Contains(line, "engine_served_model_name=m"); got != tc.wantEngineNameLogged {
				t.Errorf("log line %q names the engine's own model name: %v, want %v", line, got, tc.wantEngineNameLogged)
			}

			h.signal()
			h.ended(nil)
		})
	}
}

// A worker whose Tokenizer hook loads the model's tokenizer takes text
// prompts on a token-only engine, and chat messages with a chat template:
// its registration says so (discovery's prompts meta); without the hook it
// takes what its engine takes.
func TestTokenizerRegistration(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		hook       func(w sdk.Worker) (bool, bool)
		wantPrompt string
	}{
		"none":          {nil, "token_ids"},
		"not loaded":    {func(sdk.Worker) (bool, bool) { return false, false }, "token_ids"},
		"loaded":        {func(sdk.Worker) (bool, bool) { return true, false }, "text,token_ids"},
		"chat template": {func(sdk.Worker) (bool, bool) { return true, true }, "text,token_ids,messages"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			engine := newFakeEngine() // takes token ids only
			engine.generate = true
			modelID := make(chan string, 1)
			h := startHarnessWith(t, engine, &fakeEndpoint{}, func(c *Config) {
				if tc.hook != nil {
					c.Tokenizer = func(w sdk.Worker) (bool, bool) { modelID <- w.ModelID; return tc.hook(w) }
				}
			})
			h.send(sdk.Serving)
			h.registered(true)
			if got := h.record().Meta["prompts"]; got != tc.wantPrompt {
				t.Errorf("meta prompts %q, want %q", got, tc.wantPrompt)
			}
			if tc.hook != nil {
				if got := <-modelID; got != "org/m" {
					t.Errorf("the hook was given model id %q, want the engine's org/m", got)
				}
			}
			h.signal()
			h.ended(nil)
		})
	}
}

// Loading the tokenizer (seconds for a large model) does not hold the
// lifecycle: a stop signal or an engine loss during the load is acted on
// at once, and a SERVING during it registers only after the load, with the
// prompts the tokenizer brings.
func TestTokenizerLoadDoesNotHoldLifecycle(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		during func(h *harness)
		want   error
	}{
		"stop signal": {func(h *harness) { h.signal() }, nil},
		"engine lost": {func(h *harness) { h.send(sdk.Lost) }, outcome.ErrEngineLost},
		"serving": {func(h *harness) {
			h.send(sdk.Serving)
			h.registered(false)
		}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			engine := newFakeEngine() // takes token ids only
			engine.generate = true
			loading, release := make(chan struct{}), make(chan struct{})
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			h := startHarnessWith(t, engine, &fakeEndpoint{}, func(c *Config) {
				c.Tokenizer = func(sdk.Worker) (bool, bool) { close(loading); <-release; return true, false }
			})
			<-loading
			tc.during(h)
			if name == "serving" {
				close(release)
				h.registered(true)
				if got := h.record().Meta["prompts"]; got != "text,token_ids" {
					t.Errorf("meta prompts %q, want text,token_ids (the tokenizer loaded)", got)
				}
				h.signal()
			}
			h.ended(tc.want)
		})
	}
}

// The registration publishes the endpoint's capabilities (meta caps) as
// they stand once the Tokenizer hook returned: a tokenizer changes what
// the worker takes (stop strings on a token-only engine).
func TestCapabilitiesRegistration(t *testing.T) {
	t.Parallel()
	engine := newFakeEngine()
	engine.generate = true
	var loaded atomic.Bool
	h := startHarnessWith(t, engine, &fakeEndpoint{}, func(c *Config) {
		c.Tokenizer = func(sdk.Worker) (bool, bool) { loaded.Store(true); return true, false }
		c.Capabilities = func() discovery.Capabilities {
			if loaded.Load() {
				return discovery.ParseCapabilities("n=128,stop")
			}
			return discovery.ParseCapabilities("n=128")
		}
	})
	h.send(sdk.Serving)
	h.registered(true)
	if got := h.record().Meta[discovery.MetaCaps]; got != "n=128,stop" {
		t.Errorf("meta caps %q, want the endpoint's after the tokenizer loaded: n=128,stop", got)
	}
	h.signal()
	h.ended(nil)
}
