package pluginhost

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/sdk"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind. Run with
// SDK_TEST_ADAPTER set, the test binary is an adapter instead.
func TestMain(m *testing.M) {
	if kind := os.Getenv(envTestAdapter); kind != "" {
		serveTestAdapter(kind)
		return
	}
	goleak.VerifyTestMain(m)
}

// stubEngine is an Engine whose methods are set per test; unset ones return
// ErrUnimplemented.
type stubEngine struct {
	info  func(context.Context) (sdk.AdapterInfo, error)
	start func(context.Context, sdk.StartRequest) (sdk.Worker, error)
	watch func(context.Context) (<-chan sdk.Event, error)
}

var _ sdk.Engine = (*stubEngine)(nil)

func (s *stubEngine) Info(ctx context.Context) (sdk.AdapterInfo, error) {
	if s.info == nil {
		return sdk.AdapterInfo{}, fmt.Errorf("%w: Info", sdk.ErrUnimplemented)
	}
	return s.info(ctx)
}

func (s *stubEngine) Start(ctx context.Context, req sdk.StartRequest) (sdk.Worker, error) {
	if s.start == nil {
		return sdk.Worker{}, fmt.Errorf("%w: Start", sdk.ErrUnimplemented)
	}
	return s.start(ctx, req)
}

func (s *stubEngine) WatchAvailability(ctx context.Context) (<-chan sdk.Event, error) {
	if s.watch == nil {
		return nil, fmt.Errorf("%w: WatchAvailability", sdk.ErrUnimplemented)
	}
	return s.watch(ctx)
}

func (s *stubEngine) Shutdown(context.Context) error { return nil }

// stubGenerator is a stubEngine that forwards requests through generate.
type stubGenerator struct {
	stubEngine
	generate func(context.Context, sdk.GenerateRequest, func(sdk.Chunk) error) (sdk.Result, error)
}

var _ sdk.Generator = (*stubGenerator)(nil)

func (s *stubGenerator) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	return s.generate(ctx, req, send)
}

func (s *stubGenerator) Abort(context.Context, []string) error { return nil }

// recorder is an hclog sink that keeps each line and signals every new one.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		line, rest, ok := bytes.Cut(r.partial, []byte{'\n'})
		if !ok {
			break
		}
		r.lines = append(r.lines, string(line))
		r.partial = rest
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return len(p), nil
}

func (r *recorder) logger(name string, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: r})
}

func (r *recorder) snapshot() ([]string, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...), r.changed
}
