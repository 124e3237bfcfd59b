package adapterkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// TestStartWaitsForEverySignal: Start reports the engine serving only once
// every signal the watch follows serves. A signal that does not serve while
// the others do holds Start until the deadline, naming the signal:
// registering such an engine would be followed at once by its loss.
func TestStartWaitsForEverySignal(t *testing.T) {
	t.Parallel()
	for _, service := range []string{"", inference} {
		t.Run(fmt.Sprintf("%q", service), func(t *testing.T) {
			t.Parallel()
			e := serveEngine(t, nil, "a")
			e.SetServingStatus(service, notServing)
			a := adapterkit.New(spec(true))
			defer a.Shutdown(context.Background())
			_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: 200 * time.Millisecond, Health: policy})
			want := fmt.Sprintf("health of %q: not serving: NOT_SERVING", service)
			if !errors.Is(err, sdk.ErrStartupDeadline) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Start() = %v, want ErrStartupDeadline naming %s", err, want)
			}

			// Once it serves, a Start that is waiting returns.
			for len(e.reads) > 0 {
				<-e.reads
			}
			done := make(chan error, 1)
			go func() {
				_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: within, Health: policy})
				done <- err
			}()
			receive(t, e.reads, "a check by the waiting Start")
			e.SetServingStatus(service, serving)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Start() after %q served = %v, want nil", service, err)
				}
			case <-time.After(within):
				t.Fatalf("Start() still waiting %v after %q served", within, service)
			}
			sdktest.Watch(t, a).Expect(sdk.Serving, "Toy engine serving")
		})
	}
}

// TestStartFailureResets: whatever fails, a failed Start leaves the adapter
// as it was, so a later Start against a serving engine succeeds.
func TestStartFailureResets(t *testing.T) {
	t.Parallel()
	errEngine := errors.New("engine fault")
	tests := map[string]struct {
		spec    func(fail *atomic.Bool) adapterkit.Spec
		req     sdk.StartRequest // EngineAddr is set to the engine's
		wantErr error
	}{
		"bad option value": {
			spec: func(fail *atomic.Bool) adapterkit.Spec {
				s := spec(true)
				signals := s.Signals
				s.Options = []string{"mode"}
				s.Signals = func(ctx context.Context, conn *grpc.ClientConn, o map[string]string) ([]adapterkit.Signal, error) {
					if fail.Load() {
						return nil, &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("mode=%q: want a or b", o["mode"])}
					}
					return signals(ctx, conn, o)
				}
				return s
			},
			req:     sdk.StartRequest{Options: map[string]string{"mode": "c"}},
			wantErr: sdk.ErrInvalidArgument,
		},
		"startup deadline": {
			spec: func(fail *atomic.Bool) adapterkit.Spec {
				s := spec(true)
				signals := s.Signals
				s.Signals = func(ctx context.Context, conn *grpc.ClientConn, o map[string]string) ([]adapterkit.Signal, error) {
					sig, err := signals(ctx, conn, o)
					if fail.Load() {
						sig = append(sig, adapterkit.Signal{Name: "never", Role: adapterkit.Startup, Check: func(context.Context) error { return adapterkit.ErrNotServing }})
					}
					return sig, err
				}
				return s
			},
			req:     sdk.StartRequest{StartupDeadline: 100 * time.Millisecond},
			wantErr: sdk.ErrStartupDeadline,
		},
		"engine information unreadable": {
			spec: func(fail *atomic.Bool) adapterkit.Spec {
				s := spec(true)
				read := s.ReadWorker
				s.ReadWorker = func(ctx context.Context, conn *grpc.ClientConn) (sdk.Worker, error) {
					if fail.Load() {
						return sdk.Worker{}, errEngine
					}
					return read(ctx, conn)
				}
				return s
			},
			wantErr: sdk.ErrUnavailable,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := serveEngine(t, nil, "a")
			var fail atomic.Bool
			fail.Store(true)
			a := adapterkit.New(tt.spec(&fail))
			defer a.Shutdown(context.Background())
			req := tt.req
			req.EngineAddr, req.Health = e.addr, policy
			if _, err := a.Start(t.Context(), req); !errors.Is(err, tt.wantErr) {
				t.Fatalf("failing Start() = %v, want an error wrapping %v", err, tt.wantErr)
			}
			if _, err := a.Conn(); !errors.Is(err, sdk.ErrNotStarted) {
				t.Errorf("Conn() after a failed Start = %v, want ErrNotStarted", err)
			}
			fail.Store(false)
			req.StartupDeadline = within
			if _, err := a.Start(t.Context(), req); err != nil {
				t.Fatalf("second Start() = %v, want nil", err)
			}
		})
	}
}

// TestStartCanceled: the caller's context ending is its own error, not the
// startup deadline.
func TestStartCanceled(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	e.SetServingStatus("", notServing)
	a := adapterkit.New(spec(true))
	defer a.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-e.reads
		cancel()
	}()
	_, err := a.Start(ctx, sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: within, Health: policy})
	if !errors.Is(err, context.Canceled) || errors.Is(err, sdk.ErrStartupDeadline) {
		t.Fatalf("Start() canceled = %v, want context.Canceled and not ErrStartupDeadline", err)
	}
}

// TestCallOrder: calls that need Start fail with ErrNotStarted before it
// and after Shutdown; Start twice is ErrAlreadyStarted; Shutdown is
// idempotent.
func TestCallOrder(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	a := adapterkit.New(spec(true))
	if _, err := a.Conn(); !errors.Is(err, sdk.ErrNotStarted) {
		t.Errorf("Conn() before Start = %v, want ErrNotStarted", err)
	}
	if _, err := a.WatchAvailability(t.Context()); !errors.Is(err, sdk.ErrNotStarted) {
		t.Errorf("WatchAvailability() before Start = %v, want ErrNotStarted", err)
	}
	req := sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: within, Health: policy}
	if _, err := a.Start(t.Context(), req); err != nil {
		t.Fatalf("Start() = %v, want nil", err)
	}
	if _, err := a.Start(t.Context(), req); !errors.Is(err, sdk.ErrAlreadyStarted) {
		t.Errorf("second Start() = %v, want ErrAlreadyStarted", err)
	}
	for i := range 2 {
		if err := a.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown() #%d = %v, want nil", i+1, err)
		}
	}
	if _, err := a.Conn(); !errors.Is(err, sdk.ErrNotStarted) {
		t.Errorf("Conn() after Shutdown = %v, want ErrNotStarted", err)
	}
}

// TestWatchHealthServices: readiness not serving is NotReady and back;
// liveness not serving is Lost, the last event.
func TestWatchHealthServices(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	events := sdktest.Watch(t, start(t, spec(true), e.addr))

	events.Expect(sdk.Serving, "Toy engine serving")
	e.SetServingStatus(inference, notServing)
	events.Expect(sdk.NotReady, `Toy engine not ready: health of "toy.Inference" is NOT_SERVING`)
	e.SetServingStatus(inference, serving)
	events.Expect(sdk.Serving, "Toy engine serving")
	e.SetServingStatus("", notServing)
	events.Expect(sdk.Lost, `Toy engine lost: health of "" is NOT_SERVING`)
	events.Closed()
}

// TestWatchPolledSignals: a signal with only Check is polled. A
// not-serving answer counts at once, as its role says; failed checks are
// Lost after HealthPolicy.Failures in a row.
func TestWatchPolledSignals(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	type result struct{ err error } // what a check answers; nil serves
	var live, ready atomic.Pointer[result]
	live.Store(&result{})
	ready.Store(&result{})
	answer := func(v *atomic.Pointer[result]) func(context.Context) error {
		return func(context.Context) error { return v.Load().err }
	}
	s := spec(true)
	s.Signals = func(context.Context, *grpc.ClientConn, map[string]string) ([]adapterkit.Signal, error) {
		return []adapterkit.Signal{
			{Name: "HealthCheck", Role: adapterkit.Liveness, Check: answer(&live)},
			{Name: "ready flag", Role: adapterkit.Readiness, Check: answer(&ready)},
		}, nil
	}
	events := sdktest.Watch(t, start(t, s, e.addr))

	events.Expect(sdk.Serving, "Toy engine serving")
	ready.Store(&result{fmt.Errorf("%w: paused", adapterkit.ErrNotServing)})
	events.Expect(sdk.NotReady, "Toy engine not ready: ready flag: not serving: paused")
	ready.Store(&result{})
	events.Expect(sdk.Serving, "Toy engine serving")
	live.Store(&result{errors.New(`status "rank 3 crashed"`)})
	events.Expect(sdk.Lost, `Toy engine lost: HealthCheck: 2 checks failed in a row, last: status "rank 3 crashed"`)
	events.Closed()
}

// polledOnly is spec with its health services polled, as for an engine
// whose health Watch sends one status and ends, and polled once only, at
// the start of the watch: whatever the engine does later, only the
// connection can tell.
func polledOnly(lifetime bool) (adapterkit.Spec, sdk.HealthPolicy) {
	s := spec(lifetime)
	signals := s.Signals
	s.Signals = func(ctx context.Context, conn *grpc.ClientConn, o map[string]string) ([]adapterkit.Signal, error) {
		sig, err := signals(ctx, conn, o)
		for i := range sig {
			sig[i].Watch = nil
		}
		return sig, err
	}
	p := policy
	p.Interval = time.Hour
	return s, p
}

// TestEngineReplaced: an engine followed by polling alone, killed and
// restarted on the same address between two polls, looks healthy. The
// connection tells: after a reconnect the lifetime id is read again and a
// different one is Lost; an engine without one is Lost when the connection
// closes.
func TestEngineReplaced(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		lifetime bool
		want     string // reason prefix
	}{
		"new lifetime id": {true, `Toy engine lost: engine replaced: instance id "b", was "a"`},
		"no lifetime id":  {false, "Toy engine lost: engine connection closed (IDLE), and the engine has no lifetime id"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lis := listen(t)
			old := serveEngine(t, lis, "a")
			s, noPolling := polledOnly(tt.lifetime)
			a := adapterkit.New(s)
			defer a.Shutdown(context.Background())
			if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: old.addr, StartupDeadline: within, Health: noPolling}); err != nil {
				t.Fatal(err)
			}
			events := sdktest.Watch(t, a)
			events.Expect(sdk.Serving, "Toy engine serving")

			old.stop()
			serveEngine(t, lis, "b")
			if ev := events.Next(); ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, tt.want) {
				t.Fatalf("event after the engine was replaced = %v %q, want Lost %q", ev.Availability, ev.Reason, tt.want)
			}
			events.Closed()
		})
	}
}

// TestEngineReconnectedSameLifetime: a connection that drops to the same
// engine is not a loss; the watch carries on and still tells a later
// replacement.
func TestEngineReconnectedSameLifetime(t *testing.T) {
	t.Parallel()
	s, noPolling := polledOnly(true)
	reread := make(chan string, 10)
	s.LifetimeID = func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
		id, err := readID(ctx, conn)
		if err == nil {
			reread <- id
		}
		return id, err
	}
	lis := listen(t)
	first := serveEngine(t, lis, "a")
	a := adapterkit.New(s)
	defer a.Shutdown(context.Background())
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: first.addr, StartupDeadline: within, Health: noPolling}); err != nil {
		t.Fatal(err)
	}
	events := sdktest.Watch(t, a)
	events.Expect(sdk.Serving, "Toy engine serving")

	first.stop()
	same := serveEngine(t, lis, "a")
	receive(t, reread, "the lifetime id read after the reconnect")
	same.stop()
	serveEngine(t, lis, "c")
	if ev := events.Next(); ev.Availability != sdk.Lost || ev.Reason != `Toy engine lost: engine replaced: instance id "c", was "a"` {
		t.Fatalf("event = %v %q, want Lost by the replacement with c, and nothing before it", ev.Availability, ev.Reason)
	}
}

// hourClock is a healthwatch.Clock whose time moves only when the startup
// wait waits: After(d) advances it by d at once. Past an hour it calls up,
// once.
type hourClock struct {
	mu       sync.Mutex
	now      time.Time
	start    time.Time
	maxDelay time.Duration
	up       func()
}

func (c *hourClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *hourClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.maxDelay = max(c.maxDelay, d)
	if c.up != nil && c.now.Sub(c.start) > time.Hour {
		c.up()
		c.up = nil
	}
	fired := make(chan time.Time, 1)
	fired <- c.now
	return fired
}

// TestStartAfterLongOutage: the startup wait's retries are spaced by a
// backoff capped at HealthPolicy.RetryMax, so an engine that serves after
// an hour is found within RetryMax, not after a delay grown with the
// outage.
func TestStartAfterLongOutage(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	e.SetServingStatus("", notServing)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &hourClock{now: t0, start: t0, up: func() { e.SetServingStatus("", serving) }}
	a := adapterkit.New(spec(true), adapterkit.WithClock(clock))
	defer a.Shutdown(context.Background())
	p := policy
	p.RetryMax = 5 * time.Minute
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: within, Health: p}); err != nil {
		t.Fatalf("Start() = %v, want nil", err)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.now.Sub(t0) < time.Hour {
		t.Fatalf("Start() returned after %v of fake time, want the engine found after an hour", clock.now.Sub(t0))
	}
	if clock.maxDelay > p.RetryMax {
		t.Errorf("longest retry delay %v, want at most RetryMax %v", clock.maxDelay, p.RetryMax)
	}
}

// TestStartLogsWait: a Start waiting for an engine that does not serve
// logs so at its first failed check, with the check's error, and then once
// per WaitLogInterval of the clock: an hour.s wait is about 120 entries, not
// silence until the deadline nor one per retry.
func TestStartLogsWait(t *testing.T) {
	t.Parallel()
	e := serveEngine(t, nil, "a")
	e.SetServingStatus("", notServing)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &hourClock{now: t0, start: t0, up: func() { e.SetServingStatus("", serving) }}
	var buf logBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info, JSONFormat: true})
	a := adapterkit.New(spec(true), adapterkit.WithClock(clock), adapterkit.WithLogger(log))
	defer a.Shutdown(context.Background())
	p := policy
	p.RetryMax = 5 * time.Second
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: e.addr, StartupDeadline: within, Health: p}); err != nil {
		t.Fatalf("Start() = %v, want nil", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var entries []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["@message"] == "waiting for the engine to serve" {
			entries = append(entries, m)
		}
	}
	if len(entries) == 0 {
		t.Fatalf("log = %q, want entries saying Start waits for the engine", buf.String())
	}
	first := entries[0]
	if first["waited"] != "0s" || first["engine_addr"] != e.addr || !strings.Contains(fmt.Sprint(first["last_error"]), "NOT_SERVING") {
		t.Errorf("first entry = %v, want one at once (waited 0s) with the engine address and the last error (NOT_SERVING)", first)
	}
	// Retries are a backoff delay apart (up to RetryMax, jittered), so
	// entries are between one interval and one interval and a delay apart.
	var prev time.Duration
	for i, m := range entries[1:] {
		waited, err := time.ParseDuration(fmt.Sprint(m["waited"]))
		if err != nil {
			t.Fatalf("entry %d: waited %v: %v", i+1, m["waited"], err)
		}
		if gap := waited - prev; gap < adapterkit.WaitLogInterval || gap > adapterkit.WaitLogInterval+2*p.RetryMax {
			t.Fatalf("entry %d came %v after the one before, want between %v and %v", i+1, gap, adapterkit.WaitLogInterval, adapterkit.WaitLogInterval+2*p.RetryMax)
		}
		prev = waited
	}
	if n := len(entries); n < int(time.Hour/(adapterkit.WaitLogInterval+2*p.RetryMax)) {
		t.Errorf("%d entries over an hour's wait, want one at once and then one every %v", n, adapterkit.WaitLogInterval)
	}
}

// logBuffer is a strings.Builder safe for a logger and a reader at once.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestStartOptions: an unknown option key, the likelier typo, is reported
// before a bad value of a known one; Spec.CheckOptions judges the values
// before anything is dialled, and Adapter.CheckOptions as Start does;
// ReadWorkerFor sees the options.
func TestStartOptions(t *testing.T) {
	t.Parallel()
	s := spec(false)
	s.Options = []string{"mode"}
	s.CheckOptions = func(o map[string]string) error {
		if v, ok := o["mode"]; ok && v != "fast" {
			return &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("mode=%q: want fast", v)}
		}
		return nil
	}
	s.ReadWorkerFor = func(_ context.Context, _ *grpc.ClientConn, req sdk.StartRequest) (sdk.Worker, error) {
		return sdk.Worker{ServedModelName: "toy-" + req.Options["mode"]}, nil
	}
	addr := serveEngine(t, nil, "a").addr
	for _, tt := range []struct {
		options map[string]string
		want    string // the FieldError's Problem; "" for none
	}{
		{map[string]string{"mode": "slow", "tp": "2"}, `"tp": unknown key; this adapter accepts mode`},
		{map[string]string{"mode": "slow"}, `mode="slow": want fast`},
		{map[string]string{"mode": "fast"}, ""},
	} {
		a := adapterkit.New(s)
		// CheckOptions, without an engine, judges as Start does.
		checked := a.CheckOptions(tt.options)
		w, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: policy, Options: tt.options})
		a.Shutdown(context.Background())
		if fmt.Sprint(checked) != fmt.Sprint(err) && !(checked == nil && tt.want == "") {
			t.Errorf("CheckOptions(%v) = %v, Start = %v: want the same", tt.options, checked, err)
		}
		var fe *sdk.FieldError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Start(Options: %v) = %v, want nil", tt.options, err)
		case tt.want == "" && w.ServedModelName != "toy-fast":
			t.Errorf("Start(Options: %v) worker = %+v, want ServedModelName toy-fast from ReadWorkerFor", tt.options, w)
		case tt.want != "" && (!errors.As(err, &fe) || fe.Field != sdk.FieldOptions || fe.Problem != tt.want):
			t.Errorf("Start(Options: %v) = %v, want a *sdk.FieldError for %s: %s", tt.options, err, sdk.FieldOptions, tt.want)
		}
	}
}

// drainingSpec is spec with "" a liveness service that drains on purpose.
func drainingSpec(polled bool) adapterkit.Spec {
	s := spec(true)
	s.Signals = func(_ context.Context, conn *grpc.ClientConn, _ map[string]string) ([]adapterkit.Signal, error) {
		live := adapterkit.DrainingHealthService(conn, "")
		if polled {
			live.Watch = nil
		}
		return []adapterkit.Signal{live, adapterkit.HealthService(conn, inference, adapterkit.Readiness)}, nil
	}
	return s
}

// TestWatchDraining: a liveness service that drains on purpose turns
// NOT_SERVING while its connection and lifetime id hold: Draining, and the
// watch goes on; the engine replaced after it is still Lost. Watched or
// polled alike.
func TestWatchDraining(t *testing.T) {
	t.Parallel()
	for name, polled := range map[string]bool{"watched": false, "polled": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lis := listen(t)
			e := serveEngine(t, lis, "a")
			events := sdktest.Watch(t, start(t, drainingSpec(polled), e.addr))

			events.Expect(sdk.Serving, "Toy engine serving")
			e.SetServingStatus(inference, notServing)
			events.Expect(sdk.NotReady, `Toy engine not ready: health of "toy.Inference" is NOT_SERVING`)
			e.SetServingStatus("", notServing)
			ev := events.Next()
			if ev.Availability != sdk.Draining || !strings.HasPrefix(ev.Reason, `Toy engine draining: health of ""`) {
				t.Fatalf("event after \"\" turned NOT_SERVING = %v %q, want Draining", ev.Availability, ev.Reason)
			}
			e.stop()
			serveEngine(t, lis, "b")
			// The reopened Watches may report the new engine's statuses
			// before the lifetime check finds it another engine.
			for ev = events.Next(); ev.Availability == sdk.Serving || ev.Availability == sdk.NotReady; ev = events.Next() {
			}
			if ev.Availability != sdk.Lost {
				t.Fatalf("event after the draining engine was replaced = %v %q, want Lost", ev.Availability, ev.Reason)
			}
			events.Closed()
		})
	}
}

// TestStartNamesHTTP1: an engine address that answers HTTP/1.1 (the
// engine's HTTP port given for its gRPC one) is named as such, once,
// rather than only gRPC's "http2: frame too large" every WaitLogInterval.
func TestStartNamesHTTP1(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	var buf logBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	a := adapterkit.New(spec(true), adapterkit.WithLogger(log))
	defer a.Shutdown(context.Background())
	addr := strings.TrimPrefix(srv.URL, "http://")
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: time.Second, Health: policy}); err == nil {
		t.Fatal("Start() against an HTTP/1.1 server succeeded")
	}
	if n := strings.Count(buf.String(), "answers HTTP/1.1, not gRPC: is --engine-addr the engine's HTTP port?"); n != 1 {
		t.Errorf("log says %d times that the address answers HTTP/1.1, want once:\n%s", n, buf.String())
	}
}
