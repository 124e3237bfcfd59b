package supervisor

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/outcome"
	"github.com/vigilhq/vigil/sdk"
)

// recorder is an Observer that keeps what it is told, as lines.
type recorder struct {
	mu     sync.Mutex
	events []string
	waits  []time.Duration
}

func (r *recorder) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }

func (r *recorder) Entered(st State)                { r.add("entered " + st.String()) }
func (r *recorder) Availability(a sdk.Availability) { r.add("availability " + a.String()) }
func (r *recorder) Withdrawn(cause string)          { r.add("withdrawn " + cause) }
func (r *recorder) Reregistered(cause string)       { r.add("reregistered " + cause) }
func (r *recorder) Busy(busy bool)                  { r.add(fmt.Sprintf("busy %v", busy)) }
func (r *recorder) Recovered(cause string)          { r.add("recovered " + cause) }
func (r *recorder) EngineStarted(d time.Duration) {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// The Observer sees the worker's life as the metrics count it: withdrawn
// for not ready, registered again for the same cause, then withdrawn for
// the loss; and the endpoint is told the lifecycle is stopping.
func TestObserverSeesWithdrawalsAndReregistrations(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{}
	rec := &recorder{}
	h := startHarnessWith(t, newFakeEngine(), ep, func(c *Config) { c.Observer = rec })
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.NotReady)
	h.registered(false)
	h.send(sdk.Serving)
	h.registered(true)
	h.send(sdk.Lost)
	h.ended(outcome.ErrEngineLost)

	want := []string{
		"entered launching", "entered waiting", "entered started",
		"availability SERVING", "entered serving",
		"availability NOT_READY", "withdrawn not_ready", "entered not-ready",
		"availability SERVING", "reregistered not_ready", "entered serving",
		"availability LOST", "withdrawn lost", "entered draining",
		"entered stopped",
	}
	if diff := cmp.Diff(want, rec.get()); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	if len(rec.waits) != 1 {
		t.Errorf("EngineStarted called %d times, want once", len(rec.waits))
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !ep.stopping {
		t.Error("endpoint not told Stopping when the drain began")
	}
}

// A stop during the wait for the engine tells the endpoint Stopping (its
// liveness turns NOT_SERVING), and withdraws nothing that was not there.
func TestStopDuringWaitIsStopping(t *testing.T) {
	t.Parallel()
	ep := &fakeEndpoint{}
	rec := &recorder{}
	engine := newFakeEngine()
	engine.startBlock = make(chan struct{})
	h := startHarnessWith(t, engine, ep, func(c *Config) { c.Observer = rec })
	<-engine.startCtx
	ep.mu.Lock()
	stopping := ep.stopping
	ep.mu.Unlock()
	if stopping {
		t.Fatal("endpoint told Stopping while waiting for the engine")
	}
	h.signal()
	h.ended(nil)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !ep.stopping {
		t.Error("endpoint not told Stopping after a stop during the wait")
	}
	for _, e := range rec.get() {
		if e == "withdrawn stop" {
			t.Errorf("a worker never registered counted as withdrawn: %v", rec.get())
		}
	}
}

// A busy engine stays Serving and registered: the Observer is told busy
// and back, and nothing is withdrawn.
func TestObserverSeesBusy(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	h := startHarnessWith(t, newFakeEngine(), &fakeEndpoint{}, func(c *Config) { c.Observer = rec })
	h.send(sdk.Serving)
	h.registered(true)
	h.sendEvent(sdk.Event{Availability: sdk.Serving, Busy: true, Reason: "busy"})
	h.sendEvent(sdk.Event{Availability: sdk.Serving, Reason: "answered"})
	h.send(sdk.Lost)
	h.ended(outcome.ErrEngineLost)
	want := []string{
		"entered launching", "entered waiting", "entered started",
		"availability SERVING", "entered serving",
		"busy true", "availability SERVING",
		"busy false", "availability SERVING",
		"availability LOST", "withdrawn lost", "entered draining",
		"entered stopped",
	}
	if diff := cmp.Diff(want, rec.get()); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// availRecorder is a recorder that also hands over each availability it
// is told of, so that a test knows the loop has taken it.
type availRecorder struct {
	*recorder
	avail   chan sdk.Availability
	entered chan State
}

func (r availRecorder) Entered(st State) {
	r.recorder.Entered(st)
	r.entered <- st
}

// await returns once st has been entered.
func (r availRecorder) await(st State) {
	for got := range r.entered {
		if got == st {
			return
		}
	}
}

func (r availRecorder) Availability(a sdk.Availability) {
	r.recorder.Availability(a)
	r.avail <- a
}

// With a Tokenizer hook the worker is Preparing while it runs: nothing is
// registered, and the availability seen meanwhile takes effect when it
// returns (a SERVING registers then, a NOT_READY leaves it not ready);
// with none seen it is Started, and the next SERVING registers. (A loss
// or a stop while preparing: TestTokenizerLoadDoesNotHoldLifecycle.)
func TestPreparing(t *testing.T) {
	t.Parallel()
	for name, during := range map[string][]sdk.Availability{
		"serving": {sdk.Serving}, "not ready": {sdk.NotReady}, "serving then not ready": {sdk.Serving, sdk.NotReady}, "none": nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := availRecorder{&recorder{}, make(chan sdk.Availability, 4), make(chan State, 32)}
			loading, release := make(chan struct{}), make(chan struct{})
			h := startHarnessWith(t, newFakeEngine(), &fakeEndpoint{}, func(c *Config) {
				c.Observer = rec
				c.Tokenizer = func(sdk.Worker) (bool, bool) { close(loading); <-release; return true, false }
			})
			<-loading
			rec.await(StatePreparing)
			want := []string{"entered launching", "entered waiting", "entered started", "entered preparing"}
			for _, a := range during {
				h.send(a)
				<-rec.avail
				want = append(want, "availability "+a.String())
			}
			h.registered(false)
			close(release)
			switch {
			case len(during) > 0 && during[len(during)-1] == sdk.Serving:
				want = append(want, "entered serving")
			case len(during) > 0:
				want = append(want, "entered not-ready")
			default:
				want = append(want, "entered started")
			}
			if len(during) == 0 {
				rec.await(StateStarted)
				h.send(sdk.Serving)
				<-rec.avail
				want = append(want, "availability SERVING", "entered serving")
			}
			if len(during) == 0 || during[len(during)-1] == sdk.Serving {
				h.registered(true)
			} else {
				rec.await(StateNotReady)
			}
			h.signal()
			h.ended(nil)
			if diff := cmp.Diff(want, rec.get()[:len(want)]); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
		})
	}
}
