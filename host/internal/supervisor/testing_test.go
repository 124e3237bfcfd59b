package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
	"github.com/vigilhq/vigil/sdk"
)

// fakeEngine is an adapter the test drives: Start answers with startErr (or
// blocks until released), and events are sent by the test.
type fakeEngine struct {
	generate   bool // Info offers Generate, so Run attaches the endpoint
	startErr   error
	infoErr    error         // what Info returns
	startBlock chan struct{} // nil: Start answers at once
	events     chan sdk.Event
	startCtx   chan context.Context
	shutdowns  int
	starts     int // Starts that got past startBlock
	mu         sync.Mutex
	// shuttingDown is closed when Shutdown is first called, which then
	// waits for shutdownBlock (nil: returns at once) or its context.
	shuttingDown  chan struct{}
	shutdownBlock chan struct{}
	// shutdownHang, when set, holds Shutdown until it closes, whatever
	// its context: an adapter stuck in the call.
	shutdownHang chan struct{}
	// watchHangs holds WatchAvailability until its context ends, as the
	// host's client does for an adapter that never answers.
	watchHangs bool
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{events: make(chan sdk.Event), startCtx: make(chan context.Context, 1), shuttingDown: make(chan struct{})}
}

func (f *fakeEngine) Info(context.Context) (sdk.AdapterInfo, error) {
	return sdk.AdapterInfo{Name: "fake", Version: "1", Capabilities: sdk.Capabilities{Generate: f.generate}}, f.infoErr
}

// Generate and Abort make fakeEngine an sdk.Generator; Run attaches it
// when generate is set. Nothing is forwarded in these tests.
func (f *fakeEngine) Generate(context.Context, sdk.GenerateRequest, func(sdk.Chunk) error) (sdk.Result, error) {
	return sdk.Result{}, sdk.ErrUnavailable
}

func (f *fakeEngine) Abort(context.Context, []string) error { return nil }

func (f *fakeEngine) Start(ctx context.Context, _ sdk.StartRequest) (sdk.Worker, error) {
	f.startCtx <- ctx
	if f.startBlock != nil {
		select {
		case <-f.startBlock:
		case <-ctx.Done():
			return sdk.Worker{}, ctx.Err()
		}
	}
	f.mu.Lock()
	f.starts++
	n, err := f.starts, f.startErr
	f.mu.Unlock()
	if err != nil {
		return sdk.Worker{}, err
	}
	// Each start is another engine: i1, i2, ...
	return sdk.Worker{ModelID: "org/m", ServedModelName: "m", InstanceID: fmt.Sprintf("i%d", n), MaxModelLen: 4096}, nil
}

func (f *fakeEngine) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	if f.watchHangs {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.events, nil
}

func (f *fakeEngine) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.shutdowns++
	if f.shutdowns == 1 {
		close(f.shuttingDown)
	}
	f.mu.Unlock()
	if f.shutdownHang != nil {
		<-f.shutdownHang
	}
	if f.shutdownBlock != nil {
		select {
		case <-f.shutdownBlock:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// fakeEndpoint records Admit and Attach; Drain waits for release or ctx,
// as requests in flight would, and answers cutErr when ctx ended first.
type fakeEndpoint struct {
	mu       sync.Mutex
	serving  bool
	stopping bool          // Stopping was called
	attached *sdk.Worker   // what Attach was given; nil before
	release  chan struct{} // nil: nothing in flight
	cutErr   error
	// abandoned is Abandon's reason, which ends what release holds; ""
	// before.
	abandoned string
	stall     time.Duration // what Finish was given; 0 before
}

// Abandon ends the requests in flight, as the endpoint does at once.
func (e *fakeEndpoint) Abandon(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serving = false
	if e.abandoned == "" && e.release != nil {
		close(e.release)
	}
	e.abandoned = reason
}

// Abandoned is Abandon's reason, or "".
func (e *fakeEndpoint) Abandoned() string { e.mu.Lock(); defer e.mu.Unlock(); return e.abandoned }

func (e *fakeEndpoint) Attach(_ sdk.Generator, w sdk.Worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attached = &w
}

// Attached is the worker the endpoint was given, or nil.
func (e *fakeEndpoint) Attached() *sdk.Worker {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attached
}

func (e *fakeEndpoint) Stopping()              { e.mu.Lock(); e.stopping = true; e.mu.Unlock() }
func (e *fakeEndpoint) Admit(b bool, _ string) { e.mu.Lock(); e.serving = b; e.mu.Unlock() }
func (e *fakeEndpoint) Serving() bool          { e.mu.Lock(); defer e.mu.Unlock(); return e.serving }
func (e *fakeEndpoint) Drain(ctx context.Context, _ time.Duration) error {
	e.Admit(false, "draining")
	if e.release == nil {
		return nil
	}
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return e.cutErr
	}
}

// harness runs the lifecycle over a fake engine, a fake endpoint and the
// real file registry.
type harness struct {
	t        *testing.T
	engine   *fakeEngine
	endpoint *fakeEndpoint
	dir      string
	signals  chan os.Signal
	out      chan error // what Run returned
	killed   chan struct{}
}

func startHarness(t *testing.T, engine *fakeEngine, endpoint *fakeEndpoint, grace time.Duration) *harness {
	return startHarnessDelay(t, engine, endpoint, grace, 0)
}

func startHarnessDelay(t *testing.T, engine *fakeEngine, endpoint *fakeEndpoint, grace, shutdownDelay time.Duration) *harness {
	t.Helper()
	return startHarnessWith(t, engine, endpoint, func(c *Config) { c.GracePeriod, c.ShutdownDelay = grace, shutdownDelay })
}

// startHarnessWith runs the lifecycle with a grace period of a second,
// after configure has changed the Config.
func startHarnessWith(t *testing.T, engine *fakeEngine, endpoint *fakeEndpoint, configure func(*Config)) *harness {
	t.Helper()
	return startHarnessOn(t, engine, endpoint, func(r discovery.Registry) discovery.Registry { return r }, configure)
}

// startHarnessOn is startHarnessWith with the file registry wrapped.
func startHarnessOn(t *testing.T, engine *fakeEngine, endpoint *fakeEndpoint,
	wrap func(discovery.Registry) discovery.Registry, configure func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, engine: engine, endpoint: endpoint, dir: t.TempDir(),
		signals: make(chan os.Signal, 2), out: make(chan error, 1), killed: make(chan struct{})}
	var once sync.Once
	reg := wrap(file.New(h.dir, time.Minute))
	cfg := Config{
		Launch: func(context.Context) (Adapter, error) {
			return Adapter{Engine: engine, Version: 1, Kill: func() { once.Do(func() { close(h.killed) }) }}, nil
		},
		Registration: discovery.Registration{Service: "llm", WorkerID: "w1", Engine: "fake", Address: "127.0.0.1", Port: 1},
		Announcer:    discovery.NewAnnouncer(reg, hclog.NewNullLogger()),
		Endpoint:     endpoint,
		GracePeriod:  time.Second,
		Logger:       hclog.NewNullLogger(),
	}
	configure(&cfg)
	go func() { h.out <- Run(context.Background(), cfg, h.signals) }()
	return h
}

func (h *harness) send(a sdk.Availability) {
	h.t.Helper()
	h.sendEvent(sdk.Event{Availability: a, Reason: a.String()})
}

// sendEvent feeds ev to the lifecycle.
func (h *harness) sendEvent(ev sdk.Event) {
	h.t.Helper()
	select {
	case h.engine.events <- ev:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("lifecycle did not take event %s", ev.Availability)
	}
}

// registered waits until the worker's record is present (want true) or
// absent.
func (h *harness) registered(want bool) {
	h.t.Helper()
	path := file.Path(h.dir, discovery.Registration{Service: "llm", WorkerID: "w1"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(path)
		if (err == nil) == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("registered = %v not reached", want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// exit waits for Run to return and returns why it ended.
func (h *harness) exit() error {
	h.t.Helper()
	select {
	case err := <-h.out:
		select {
		case <-h.killed:
		default:
			h.t.Error("Run returned without killing the adapter")
		}
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return")
		return nil
	}
}

// ended fails the test unless Run ended for want (nil: a clean stop).
func (h *harness) ended(want error) {
	h.t.Helper()
	if err := h.exit(); want == nil && err != nil || !errors.Is(err, want) {
		h.t.Errorf("Run returned %v, want %v", err, want)
	}
}

func (h *harness) signal() { h.signals <- syscall.SIGTERM }

// record reads the worker's file registry record; it fails the test when
// there is none.
func (h *harness) record() file.Record {
	h.t.Helper()
	recs, err := file.List(h.dir, "llm", time.Now())
	if err != nil || len(recs) != 1 {
		h.t.Fatalf("file registry holds %d records (error %v), want the worker's", len(recs), err)
	}
	return recs[0]
}

// logBuffer is a logger's output that tests read while Run writes it.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // closed and replaced on every write; nil before the first
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wrote != nil {
		close(b.wrote)
	}
	b.wrote = make(chan struct{})
	return b.buf.Write(p)
}

// logger is an info logger writing to b.
func (b *logBuffer) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: b, Level: hclog.Info})
}

// await waits until a line containing substr has been written, and
// returns it.
func (b *logBuffer) await(t *testing.T, substr string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		if b.wrote == nil {
			b.wrote = make(chan struct{})
		}
		wrote := b.wrote
		b.mu.Unlock()
		if l := b.line(substr); l != "" {
			return l
		}
		select {
		case <-wrote:
		case <-timeout:
			t.Fatalf("no log line containing %q within 10s", substr)
			return ""
		}
	}
}

// line returns the first line containing substr, or "".
func (b *logBuffer) line(substr string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range strings.Lines(b.buf.String()) {
		if strings.Contains(l, substr) {
			return strings.TrimSuffix(l, "\n")
		}
	}
	return ""
}

// heldRegistry holds every Register until release is closed, as a slow
// backend would, and lets it land whatever the caller's context: it closes
// registering when the first begins and landed when it has returned.
type heldRegistry struct {
	discovery.Registry
	registering, release, landed chan struct{}
	begin, end                   sync.Once
}

func newHeldRegistry(r discovery.Registry) *heldRegistry {
	return &heldRegistry{Registry: r, registering: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
}

func (r *heldRegistry) Register(ctx context.Context, reg discovery.Registration) error {
	r.begin.Do(func() { close(r.registering) })
	<-r.release
	defer r.end.Do(func() { close(r.landed) })
	return r.Registry.Register(context.WithoutCancel(ctx), reg)
}

// holds reports the records the file registry holds now.
func (h *harness) holds() []file.Record {
	h.t.Helper()
	recs, err := file.List(h.dir, "llm", time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}
