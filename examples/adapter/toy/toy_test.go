package toy_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/examples/adapter/fakeengine"
	"github.com/vigilhq/vigil/examples/adapter/toy"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// health checks often, so that the tests see changes quickly.
var health = sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: time.Second, Failures: 2, RetryMax: 50 * time.Millisecond}

// serve runs a fake toy engine (fakeengine) until the test ends.
func serve(t *testing.T) *fakeengine.Engine {
	t.Helper()
	e, err := fakeengine.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("engine Stop() = %v, want nil", err)
		}
	})
	return e
}

// started returns an adapter started against addr with options, shut down
// when the test ends.
func started(t *testing.T, addr string, options map[string]string) *toy.Adapter {
	t.Helper()
	a := toy.New()
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 10 * time.Second, Health: health, Options: options}); err != nil {
		t.Fatalf("Start(%s) = %v, want nil", addr, err)
	}
	return a
}

// TestConformance holds the adapter to the sdk's contract with the sdk's
// conformance kit: directly, across the plugin boundary, and as an
// executable (this test binary, see TestMain), with every hook, which the
// fake engine gives.
func TestConformance(t *testing.T) {
	engines := map[string]*fakeengine.Engine{}
	sdktest.TestEngine(t, sdktest.Harness{
		Name:       toy.Name,
		New:        func() sdk.Engine { return toy.New() },
		Executable: os.Args[0],
		Serving: func(t *testing.T) (string, func()) {
			e := serve(t)
			engines[e.Addr] = e
			return e.Addr, func() { e.Stop() }
		},
		Fail:     func(_ *testing.T, addr string) { engines[addr].Fail() },
		NotReady: func(_ *testing.T, addr string) { engines[addr].Pause(true) },
		Ready:    func(_ *testing.T, addr string) { engines[addr].Pause(false) },
		Hold:     func(t *testing.T, addr string) { engines[addr].Hold(); t.Cleanup(engines[addr].Release) },
		Aborted:  func(_ *testing.T, addr, id string) <-chan struct{} { return engines[addr].Aborted(id) },
	})
}

// TestMain serves the adapter when TestConformance launches this binary as
// its executable, and otherwise runs the tests.
func TestMain(m *testing.M) {
	if sdktest.ServeAdapter(func() sdk.Engine { return toy.New() }) {
		return
	}
	os.Exit(m.Run())
}

// TestNotReady: a paused engine is NotReady, and Serving again once it
// resumes; the watch goes on.
func TestNotReady(t *testing.T) {
	t.Parallel()
	s := serve(t)
	events := sdktest.Watch(t, started(t, s.Addr, nil))
	events.Expect(sdk.Serving, "Toy engine serving")
	s.Pause(true)
	events.Expect(sdk.NotReady, `Toy engine not ready: health of "toy.v1.EngineService" is NOT_SERVING`)
	s.Pause(false)
	events.Expect(sdk.Serving, "Toy engine serving")
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		options map[string]string
		req     sdk.GenerateRequest
		text    string
		tokens  int
		want    sdk.Result
	}{
		"text": {
			req:    sdk.GenerateRequest{Text: "hello toy engine"},
			text:   "hello toy engine",
			tokens: 3,
			want:   sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: 3, CompletionTokens: 3},
		},
		"token ids": {
			req:    sdk.GenerateRequest{TokenIDs: []uint32{7, 8}},
			tokens: 2,
			want:   sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: 2, CompletionTokens: 2},
		},
		"max tokens": {
			req:    sdk.GenerateRequest{Text: "one two three", MaxTokens: 2},
			text:   "one two",
			tokens: 2,
			want:   sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 3, CompletionTokens: 2},
		},
		"max tokens option": {
			options: map[string]string{toy.OptionMaxTokens: "1"},
			req:     sdk.GenerateRequest{Text: "one two three"},
			text:    "one",
			tokens:  1,
			want:    sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 3, CompletionTokens: 1},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := started(t, serve(t).Addr, tt.options)
			tt.req.RequestID = "r1"
			var text strings.Builder
			var tokens int
			res, err := a.Generate(t.Context(), tt.req, func(c sdk.Chunk) error {
				text.WriteString(c.Text)
				tokens += len(c.TokenIDs)
				return nil
			})
			if err != nil {
				t.Fatalf("Generate() = %v, want nil", err)
			}
			if text.String() != tt.text || tokens != tt.tokens {
				t.Errorf("Generate() sent %q in %d tokens, want %q in %d", text.String(), tokens, tt.text, tt.tokens)
			}
			if res != tt.want {
				t.Errorf("Generate() = %+v, want %+v", res, tt.want)
			}
		})
	}
}

// TestGenerateErrors: what the host answers its client depends on the
// error's class, so the adapter keeps the engine's meaning.
func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	s := serve(t)
	a := started(t, s.Addr, nil)
	send := func(sdk.Chunk) error { return nil }
	if _, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "empty"}, send); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Generate() with no prompt = %v, want sdk.ErrInvalidArgument", err)
	}
	_, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "eos", Text: "hi", IgnoreEOS: true}, send)
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "invalid argument: ignore_eos: ") {
		t.Errorf("Generate(IgnoreEOS: true) = %v, want sdk.ErrInvalidArgument naming ignore_eos first", err)
	}
	s.Pause(true)
	if _, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "paused", Text: "hi"}, send); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("Generate() while paused = %v, want sdk.ErrUnavailable", err)
	}
}

// TestGenerateCancel: a caller that goes away gets its context's error at
// once, however long the engine would have gone on.
func TestGenerateCancel(t *testing.T) {
	t.Parallel()
	s := serve(t)
	s.Hold()
	a := started(t, s.Addr, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := a.Generate(ctx, sdk.GenerateRequest{RequestID: "slow", Text: "a b c"}, func(sdk.Chunk) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate() past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

// TestBadOption: a bad option value names the key, as an *sdk.FieldError
// for the options, so vigil can point at its --engine-option flag; an
// unknown key, the likelier typo, is named before a bad value.
func TestBadOption(t *testing.T) {
	t.Parallel()
	addr := serve(t).Addr
	for _, tt := range []struct {
		options map[string]string
		want    string
	}{
		{map[string]string{toy.OptionMaxTokens: "many"}, `max-tokens="many": want a number of tokens, 0 or more`},
		{map[string]string{"tp": "2"}, `"tp": unknown key; this adapter accepts max-tokens`},
		{map[string]string{toy.OptionMaxTokens: "many", "tp": "2"}, `"tp": unknown key; this adapter accepts max-tokens`},
	} {
		_, err := toy.New().Start(t.Context(), sdk.StartRequest{EngineAddr: addr, Options: tt.options})
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != sdk.FieldOptions || fe.Problem != tt.want {
			t.Errorf("Start(Options: %v) = %v, want an *sdk.FieldError for %s: %s", tt.options, err, sdk.FieldOptions, tt.want)
		}
	}
}
