package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stubEngine is an Engine whose methods are set per test; unset ones return
// ErrUnimplemented.
type stubEngine struct {
	info     func(context.Context) (AdapterInfo, error)
	start    func(context.Context, StartRequest) (Worker, error)
	watch    func(context.Context) (<-chan Event, error)
	shutdown func(context.Context) error
}

var _ Engine = (*stubEngine)(nil)

func (s *stubEngine) Info(ctx context.Context) (AdapterInfo, error) {
	if s.info == nil {
		return AdapterInfo{}, fmt.Errorf("%w: Info", ErrUnimplemented)
	}
	return s.info(ctx)
}

func (s *stubEngine) Start(ctx context.Context, req StartRequest) (Worker, error) {
	if s.start == nil {
		return Worker{}, fmt.Errorf("%w: Start", ErrUnimplemented)
	}
	return s.start(ctx, req)
}

func (s *stubEngine) WatchAvailability(ctx context.Context) (<-chan Event, error) {
	if s.watch == nil {
		return nil, fmt.Errorf("%w: WatchAvailability", ErrUnimplemented)
	}
	return s.watch(ctx)
}

func (s *stubEngine) Shutdown(ctx context.Context) error {
	if s.shutdown == nil {
		return fmt.Errorf("%w: Shutdown", ErrUnimplemented)
	}
	return s.shutdown(ctx)
}

// sendEvents returns a watch function that sends events, then closes the
// channel; it also closes the channel when ctx ends. ended is closed when
// the producer has returned.
func sendEvents(events []Event, ended chan<- struct{}) func(context.Context) (<-chan Event, error) {
	return func(ctx context.Context) (<-chan Event, error) {
		out := make(chan Event)
		go func() {
			defer close(ended)
			defer close(out)
			for _, e := range events {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}()
		return out, nil
	}
}

// collect reads events until the channel closes.
func collect(t *testing.T, events <-chan Event) []Event {
	t.Helper()
	var got []Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return got
			}
			got = append(got, e)
		case <-timeout:
			t.Fatalf("event channel still open after 10s; events so far: %v", got)
		}
	}
}

var (
	t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Second)
	t2 = t0.Add(2 * time.Second)
)

func TestPluginEngineInfoAndStart(t *testing.T) {
	t.Parallel()
	info := AdapterInfo{Name: "stub", Version: "1.2.3", Capabilities: Capabilities{Readiness: true}}
	worker := Worker{ModelID: "/m", ServedModelName: "m", EngineVersion: "v", InstanceID: "i", MaxModelLen: 8, KVBlockSize: 4, SupportsTextInput: true}
	req := StartRequest{EngineAddr: "127.0.0.1:1", StartupDeadline: time.Minute, Health: HealthPolicy{Failures: 3}, Options: map[string]string{"k": "v"}}
	var gotReq StartRequest
	e := TestPluginEngine(t, &stubEngine{
		info: func(context.Context) (AdapterInfo, error) { return info, nil },
		start: func(_ context.Context, r StartRequest) (Worker, error) {
			gotReq = r
			return worker, nil
		},
		shutdown: func(context.Context) error { return nil },
	})
	gotInfo, err := e.Info(t.Context())
	if err != nil {
		t.Fatalf("Info() error = %v, want nil", err)
	}
	if diff := cmp.Diff(info, gotInfo); diff != "" {
		t.Errorf("Info() mismatch (-want +got):\n%s", diff)
	}
	gotWorker, err := e.Start(t.Context(), req)
	if err != nil {
		t.Fatalf("Start() error = %v, want nil", err)
	}
	if diff := cmp.Diff(worker, gotWorker); diff != "" {
		t.Errorf("Start() worker mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(req, gotReq); diff != "" {
		t.Errorf("request the adapter saw mismatch (-want +got):\n%s", diff)
	}
	if err := e.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown() = %v, want nil", err)
	}
}

// TestPluginEngineErrors: every method's error keeps its class and message
// across the boundary.
func TestPluginEngineErrors(t *testing.T) {
	t.Parallel()
	for _, class := range []error{ErrInvalidArgument, ErrStartupDeadline, ErrAlreadyStarted, ErrNotStarted, ErrUnavailable, ErrUnimplemented} {
		t.Run(class.Error(), func(t *testing.T) {
			t.Parallel()
			sent := fmt.Errorf("%w: from the stub", class)
			e := TestPluginEngine(t, &stubEngine{
				info:     func(context.Context) (AdapterInfo, error) { return AdapterInfo{}, sent },
				start:    func(context.Context, StartRequest) (Worker, error) { return Worker{}, sent },
				watch:    func(context.Context) (<-chan Event, error) { return nil, sent },
				shutdown: func(context.Context) error { return sent },
			})
			_, infoErr := e.Info(t.Context())
			_, startErr := e.Start(t.Context(), StartRequest{})
			events, watchErr := e.WatchAvailability(t.Context())
			shutdownErr := e.Shutdown(t.Context())
			for method, err := range map[string]error{"Info": infoErr, "Start": startErr, "WatchAvailability": watchErr, "Shutdown": shutdownErr} {
				if !errors.Is(err, class) || err.Error() != sent.Error() {
					t.Errorf("%s() error = %v, want %q wrapping %q", method, err, sent, class)
				}
			}
			if events != nil {
				t.Errorf("WatchAvailability() channel = %v, want nil with the error", events)
			}
		})
	}
}

// TestPluginEngineFieldError: Start's field at fault crosses the boundary.
func TestPluginEngineFieldError(t *testing.T) {
	t.Parallel()
	sent := &FieldError{Field: FieldEngineAddr, Problem: `"localhost": want host:port`}
	e := TestPluginEngine(t, &stubEngine{
		start: func(context.Context, StartRequest) (Worker, error) {
			return Worker{}, fmt.Errorf("ref adapter: %w", sent)
		},
	})
	_, err := e.Start(t.Context(), StartRequest{})
	var got *FieldError
	if !errors.As(err, &got) || *got != *sent || err.Error() != "ref adapter: "+sent.Error() {
		t.Errorf("Start() error = %v, want %q wrapping %#v", err, "ref adapter: "+sent.Error(), sent)
	}
}

// TestPluginEngineStartCanceled: cancelling the host's call cancels the
// adapter's Start, and the host sees context.Canceled.
func TestPluginEngineStartCanceled(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	adapterErr := make(chan error, 1)
	e := TestPluginEngine(t, &stubEngine{
		start: func(ctx context.Context, _ StartRequest) (Worker, error) {
			close(entered)
			<-ctx.Done()
			adapterErr <- ctx.Err()
			return Worker{}, fmt.Errorf("waiting for engine: %w", ctx.Err())
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-entered
		cancel()
	}()
	_, err := e.Start(ctx, StartRequest{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start() error = %v, want an error wrapping context.Canceled", err)
	}
	select {
	case err := <-adapterErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("adapter's ctx.Err() = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("adapter's Start still running 10s after the host cancelled")
	}
}

func TestPluginEngineWatch(t *testing.T) {
	t.Parallel()
	serving := Event{Availability: Serving, Reason: "serving", Time: t0}
	notReady := Event{Availability: NotReady, Reason: "paused", Time: t1}
	lost := Event{Availability: Lost, Reason: "engine lost", Time: t2}
	tests := map[string]struct {
		sent []Event
		want []Event
	}{
		"ends with Lost": {
			sent: []Event{serving, notReady, serving, lost},
			want: []Event{serving, notReady, serving, lost},
		},
		// Nothing after Lost crosses: Lost is terminal.
		"nothing after Lost": {
			sent: []Event{serving, lost, serving},
			want: []Event{serving, lost},
		},
		// A channel closed without Lost means the engine is lost too; the
		// host must be told so.
		"closed without Lost": {
			sent: []Event{serving},
			want: []Event{serving, {Availability: Lost, Reason: ReasonStreamEnded}},
		},
		"closed at once": {
			want: []Event{{Availability: Lost, Reason: ReasonStreamEnded}},
		},
		"unknown availability is Lost": {
			sent: []Event{serving, {Availability: Availability(9), Reason: "confused", Time: t1}},
			want: []Event{serving, {Availability: Lost, Reason: "confused", Time: t1}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ended := make(chan struct{})
			e := TestPluginEngine(t, &stubEngine{watch: sendEvents(tt.sent, ended)})
			events, err := e.WatchAvailability(t.Context())
			if err != nil {
				t.Fatalf("WatchAvailability() error = %v, want nil", err)
			}
			got := collect(t, events)
			// The relay's own Lost carries the time the host saw it.
			ignoreTime := cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".Time"
			}, cmp.Comparer(func(a, b time.Time) bool { return a.IsZero() || b.IsZero() || a.Equal(b) }))
			if diff := cmp.Diff(tt.want, got, ignoreTime); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Error("adapter's event producer still running 10s after the stream ended")
			}
		})
	}
}

// TestPluginEngineWatchCancel: cancelling the host's ctx closes the host's
// channel and ends the adapter's watch.
func TestPluginEngineWatchCancel(t *testing.T) {
	t.Parallel()
	var adapterCtx context.Context
	var mu sync.Mutex
	e := TestPluginEngine(t, &stubEngine{
		watch: func(ctx context.Context) (<-chan Event, error) {
			mu.Lock()
			adapterCtx = ctx
			mu.Unlock()
			out := make(chan Event, 1)
			out <- Event{Availability: Serving, Time: t0}
			go func() {
				<-ctx.Done()
				close(out)
			}()
			return out, nil
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	events, err := e.WatchAvailability(ctx)
	if err != nil {
		t.Fatalf("WatchAvailability() error = %v, want nil", err)
	}
	if e := <-events; e.Availability != Serving {
		t.Fatalf("first event = %v, want %v", e.Availability, Serving)
	}
	cancel()
	for e := range collect(t, events) {
		t.Errorf("event %+v after cancel, want the channel closed", e)
	}
	mu.Lock()
	actx := adapterCtx
	mu.Unlock()
	select {
	case <-actx.Done():
	case <-time.After(10 * time.Second):
		t.Error("adapter's watch ctx not done 10s after the host cancelled")
	}
}
