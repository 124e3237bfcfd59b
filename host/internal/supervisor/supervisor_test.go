package supervisor

import (
	"fmt"
	"testing"
	"time"

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
	if code := h.exit(); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
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
	if code := h.exit(); code != ExitOK {
		t.Errorf("exit code = %d, want %d", code, ExitOK)
	}
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
	if code := h.exit(); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
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
	if code := h.exit(); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
}

// The drain ends at the grace period even when requests never finish.
func TestLifecycleGracePeriodBoundsDrain(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{release: make(chan struct{})} // never released
	h := startHarness(t, newFakeEngine(), ep, 100*time.Millisecond)
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	if code := h.exit(); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
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
	if code := h.exit(); code != ExitOK {
		t.Errorf("exit code = %d, want %d", code, ExitOK)
	}
	if ctx.Err() == nil {
		t.Error("Start's context was not cancelled")
	}
	h.registered(false)
}

// Start failing exits 1: startup deadline or any other error.
func TestLifecycleStartFails(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"deadline": fmt.Errorf("%w: engine did not serve", sdk.ErrStartupDeadline),
		"other":    fmt.Errorf("%w: engine-addr", sdk.ErrInvalidArgument),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEngine()
			e.startErr = err
			h := startHarness(t, e, &fakeEndpoint{}, time.Second)
			if code := h.exit(); code != ExitFailure {
				t.Errorf("exit code = %d, want %d", code, ExitFailure)
			}
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
	if code := h.exit(); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
	h.registered(false)
}
