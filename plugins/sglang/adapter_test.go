package sglang_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigilhq/vigil/plugins/sglang"
	"github.com/vigilhq/vigil/plugins/sglang/mock"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// within bounds every wait for the adapter; it only decides when a hung
// test fails.
const within = 10 * time.Second

// health checks often, so losses through polling show quickly.
var health = sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: time.Second, Failures: 2, RetryMax: 50 * time.Millisecond}

// serveMock serves a mock SGLang engine on loopback; it is stopped when the
// test ends.
func serveMock(t *testing.T, cfg mock.Config) (*mock.Engine, string) {
	t.Helper()
	e := mock.New(cfg)
	return e, enginemock.Loopback(t, e.Engine, "")
}

// post sends one control request to the mock and requires 200.
func post(t *testing.T, e *mock.Engine, path, body string) {
	t.Helper()
	enginemock.Post(t, e.Engine, path, body)
}

// started returns an adapter started against addr with options, shut down
// when the test ends.
func started(t *testing.T, addr string, options map[string]string) *sglang.Adapter {
	t.Helper()
	a := sglang.New()
	sdktest.Start(t, a, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health, Options: options})
	return a
}

// layouts are sglang.runtime.v1's two layouts, which the runtime's tests
// run against.
var layouts = []mock.Layout{mock.LayoutReleased, mock.LayoutNew}

// TestConformance checks the adapter against the sdk contract on either
// API and either layout of the current one, in every mode (the test binary
// standing in for the executable, see TestMain), with every hook the mock
// gives: unhealthy is failure, pause is not ready; an older server takes
// no requests.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		api    mock.API
		layout mock.Layout
	}{{mock.APIRuntime, mock.LayoutReleased}, {mock.APIRuntime, mock.LayoutNew}, {mock.APIScheduler, ""}} {
		api := tt.api
		t.Run(strings.Trim(string(api)+"/"+string(tt.layout), "/"), func(t *testing.T) {
			t.Parallel() // each config has its own engines; the rules mostly wait
			engines := map[string]*mock.Engine{}
			sdktest.TestEngine(t, sdktest.Harness{
				Name:       sglang.Name,
				New:        func() sdk.Engine { return sglang.New() },
				Executable: os.Args[0],
				Serving: func(t *testing.T) (string, func()) {
					e, addr := serveMock(t, mock.Config{Model: "m", API: api, Layout: tt.layout})
					engines[addr] = e
					return addr, e.Stop
				},
				Unnamed:             api == mock.APIScheduler,
				GenerateUnavailable: api == mock.APIScheduler,
				Fail:                func(t *testing.T, addr string) { post(t, engines[addr], "/health", `{"status": "NOT_SERVING"}`) },
				NotReady:            func(t *testing.T, addr string) { post(t, engines[addr], "/pause", "") },
				Ready:               func(t *testing.T, addr string) { post(t, engines[addr], "/resume", "") },
				Hold:                func(t *testing.T, addr string) { engines[addr].Hold(1); t.Cleanup(engines[addr].Release) },
				Aborted:             func(_ *testing.T, addr, id string) <-chan struct{} { return engines[addr].Aborted(id) },
				CheckLatency:        func(_ *testing.T, addr string, d time.Duration) { engines[addr].SetCheckLatency(d) },
			})
		})
	}
}

func TestStartWorker(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg  mock.Config
		opts map[string]string
		want sdk.Worker
	}{
		"runtime": {
			cfg:  mock.Config{Model: "org/model", InstanceID: "42", ContextLength: 8192},
			want: sdk.Worker{ModelID: "org/model", ServedModelName: "org/model", EngineVersion: "0.5.0-mock", InstanceID: "42", MaxModelLen: 8192, Accepts: strings.Join(releasedAccepts, ",")},
		},
		"runtime, new layout": {
			cfg:  mock.Config{Model: "org/model", InstanceID: "42", ContextLength: 8192, Layout: mock.LayoutNew},
			want: sdk.Worker{ModelID: "org/model", ServedModelName: "org/model", EngineVersion: "0.5.0-mock", InstanceID: "42", MaxModelLen: 8192, Accepts: strings.Join(newAccepts, ",")},
		},
		"context length null": {
			cfg:  mock.Config{Model: "m", InstanceID: "7"},
			want: sdk.Worker{ModelID: "m", ServedModelName: "m", EngineVersion: "0.5.0-mock", InstanceID: "7", Accepts: strings.Join(releasedAccepts, ",")},
		},
		// An older server reports nothing about itself, and takes no
		// request through vigil: a stated empty set.
		"scheduler, detected":  {cfg: mock.Config{API: mock.APIScheduler}, want: sdk.Worker{Accepts: "none"}},
		"scheduler, by option": {cfg: mock.Config{API: mock.APIScheduler}, opts: map[string]string{"api": "scheduler"}, want: sdk.Worker{Accepts: "none"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, tt.cfg)
			a := sglang.New()
			defer a.Shutdown(context.Background())
			got, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health, Options: tt.opts})
			if err != nil {
				t.Fatalf("Start() = %v, want nil", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("worker (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStartWaits: Start waits while the engine is loading, paused or
// unhealthy, and reports the engine serving only once HealthCheck is
// healthy and the state is UP and not paused.
func TestStartWaits(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg  mock.Config
		hold string // control path that keeps the engine from serving
		want string // in the startup deadline's error
	}{
		"loading":   {cfg: mock.Config{StartupDelay: time.Hour}, want: "HealthCheck"},
		"paused":    {hold: "/pause", want: "engine state: not serving: generation paused"},
		"unhealthy": {hold: "/health", want: "HealthCheck"},
	}
	for name, tt := range tests {
		for _, layout := range layouts {
			t.Run(name+"/"+string(layout), func(t *testing.T) {
				t.Parallel()
				cfg := tt.cfg
				cfg.Layout = layout
				startWaits(t, cfg, tt.hold, tt.want)
			})
		}
	}
}

// startWaits holds a mock engine of cfg by hold and requires Start to
// miss its deadline naming want.
func startWaits(t *testing.T, cfg mock.Config, hold, want string) {
	t.Helper()
	e, addr := serveMock(t, cfg)
	switch hold {
	case "/health":
		post(t, e, "/health", `{"status": "NOT_SERVING"}`)
	case "/pause":
		post(t, e, "/pause", "")
	}
	a := sglang.New()
	defer a.Shutdown(context.Background())
	_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 300 * time.Millisecond, Health: health})
	if !errors.Is(err, sdk.ErrStartupDeadline) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start() = %v, want ErrStartupDeadline naming %s", err, want)
	}
}

// TestStartBadOption: a value of api or layout that names none, or a
// layout for the older API, is a FieldError on the options naming it.
func TestStartBadOption(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{})
	tests := []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"api": "v2"}, `api="v2": want auto, runtime or scheduler`},
		{map[string]string{"layout": "v3"}, `layout="v3": want auto, released or new`},
		{map[string]string{"api": "scheduler", "layout": "new"}, `layout=new: the layout is sglang.runtime.v1's; api=scheduler has none`},
	}
	for _, tt := range tests {
		a := sglang.New()
		_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Options: tt.opts})
		a.Shutdown(context.Background())
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != sdk.FieldOptions || !strings.Contains(fe.Problem, tt.want) {
			t.Errorf("Start(%v) = %v, want a FieldError on the options saying %s", tt.opts, err, tt.want)
		}
	}
}

// TestWatchRuntime: the state stream's pause is NotReady and back; a new
// instance id is Lost.
func TestWatchRuntime(t *testing.T) {
	t.Parallel()
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			e, addr := serveMock(t, mock.Config{InstanceID: "1", Layout: layout})
			events := sdktest.Watch(t, started(t, addr, nil))

			events.Expect(sdk.Serving, "SGLang engine serving")
			post(t, e, "/pause", "")
			events.Expect(sdk.NotReady, "SGLang engine not ready: generation paused")
			post(t, e, "/resume", "")
			events.Expect(sdk.Serving, "SGLang engine serving")
			post(t, e, "/replace", `{"instance_id": "2"}`)
			events.Expect(sdk.Lost, "SGLang engine lost: engine replaced: instance id 2, was 1")
			events.Closed()
		})
	}
}

// TestLost: however the engine fails, it is Lost, on either API.
func TestLost(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		api    mock.API
		layout mock.Layout
		lose   func(e *mock.Engine)
		want   string
	}{
		"replaced":           {mock.APIRuntime, mock.LayoutReleased, func(e *mock.Engine) { e.Replace("") }, "SGLang engine lost: engine replaced"},
		"replaced, new":      {mock.APIRuntime, mock.LayoutNew, func(e *mock.Engine) { e.Replace("") }, "SGLang engine lost: engine replaced"},
		"stopped":            {mock.APIRuntime, mock.LayoutReleased, (*mock.Engine).Stop, "SGLang engine lost"},
		"stopped, new":       {mock.APIRuntime, mock.LayoutNew, (*mock.Engine).Stop, "SGLang engine lost"},
		"scheduler not live": {mock.APIScheduler, "", nil, `SGLang engine lost: health of "" is NOT_SERVING`},
		"scheduler stopped":  {mock.APIScheduler, "", (*mock.Engine).Stop, "SGLang engine lost"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, addr := serveMock(t, mock.Config{API: tt.api, Layout: tt.layout})
			events := sdktest.Watch(t, started(t, addr, nil))
			events.Expect(sdk.Serving, "SGLang engine serving")
			if tt.lose == nil {
				post(t, e, "/health", `{"service": "", "status": "NOT_SERVING"}`)
			} else {
				go tt.lose(e)
			}
			ev := events.Next()
			// A stop may show readiness, and the runtime's drain, first.
			for ev.Availability == sdk.NotReady || ev.Availability == sdk.Draining {
				ev = events.Next()
			}
			if ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, tt.want) {
				t.Fatalf("event = %v %q, want Lost %q", ev.Availability, ev.Reason, tt.want)
			}
			events.Closed()
		})
	}
}

// TestRuntimeDraining: the runtime's grpc.health.v1 NOT_SERVING while its
// state stream, connection and lifetime id hold is a server that stops and
// lets open calls finish: Draining, and the watch goes on; the engine
// replaced is Lost. The older scheduler's "" NOT_SERVING stays Lost
// (TestLost): its Python server ends generations before its grace period.
func TestRuntimeDraining(t *testing.T) {
	t.Parallel()
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			runtimeDraining(t, layout)
		})
	}
}

func runtimeDraining(t *testing.T, layout mock.Layout) {
	e, addr := serveMock(t, mock.Config{API: mock.APIRuntime, Layout: layout})
	events := sdktest.Watch(t, started(t, addr, nil))
	events.Expect(sdk.Serving, "SGLang engine serving")
	post(t, e, "/drain", "")
	events.Expect(sdk.Draining, `SGLang engine draining: health of "sglang.runtime.v1.SglangService": not serving: NOT_SERVING`)
	if err := e.Replace(""); err != nil {
		t.Fatal(err)
	}
	if ev := events.Next(); ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, "SGLang engine lost: engine replaced") {
		t.Fatalf("event after the draining engine was replaced = %v %q, want Lost", ev.Availability, ev.Reason)
	}
	events.Closed()
}

// TestUnhealthyIsLost: "healthy" false in the state stream is Lost at once,
// in either layout.
func TestUnhealthyIsLost(t *testing.T) {
	t.Parallel()
	for layout, want := range map[mock.Layout]string{
		mock.LayoutReleased: "SGLang engine lost: engine state UNHEALTHY, healthy false",
		mock.LayoutNew:      "SGLang engine lost: engine state healthy false",
	} {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			e, addr := serveMock(t, mock.Config{Layout: layout})
			events := sdktest.Watch(t, started(t, addr, nil))
			events.Expect(sdk.Serving, "SGLang engine serving")
			post(t, e, "/health", `{"status": "NOT_SERVING"}`)
			events.Expect(sdk.Lost, want)
		})
	}
}

// TestSchedulerNotReady: an older server's scheduler service not serving
// is NotReady.
func TestSchedulerNotReady(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{API: mock.APIScheduler})
	events := sdktest.Watch(t, started(t, addr, nil))
	events.Expect(sdk.Serving, "SGLang engine serving")
	post(t, e, "/pause", "")
	events.Expect(sdk.NotReady, fmt.Sprintf("SGLang engine not ready: health of %q is NOT_SERVING", mock.SchedulerService))
	post(t, e, "/resume", "")
	events.Expect(sdk.Serving, "SGLang engine serving")
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{})
	a := started(t, addr, nil)
	prompt := []uint32{3, 4}
	var got []uint32
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g1", TokenIDs: prompt, MaxTokens: 5}, func(c sdk.Chunk) error {
		got = append(got, c.TokenIDs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for i := range 5 {
		want = append(want, enginemock.OutputToken(0, prompt, i))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if res != (sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 2, CompletionTokens: 5}) {
		t.Errorf("result = %+v, want length, 2 prompt and 5 completion tokens", res)
	}
	stop := enginemock.OutputToken(0, prompt, 2)
	res, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g2", TokenIDs: prompt, MaxTokens: 5, StopTokenIDs: []uint32{stop}}, func(sdk.Chunk) error { return nil })
	if err != nil || res.FinishReason != sdk.FinishStop || res.CompletionTokens != 3 {
		t.Errorf("Generate with a stop token = %+v, %v; want stop after 3 tokens", res, err)
	}
}

// TestGenerateRefused: text prompts and values SGLang cannot carry are
// invalid arguments naming the field; a paused engine is unavailable; an
// older server takes no requests.
func TestGenerateRefused(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{})
	a := started(t, addr, nil)
	_, oldAddr := serveMock(t, mock.Config{API: mock.APIScheduler})
	old := started(t, oldAddr, nil)
	_, shortAddr := serveMock(t, mock.Config{ContextLength: 8})
	short := started(t, shortAddr, nil)
	seed := int64(1)
	none := func(sdk.Chunk) error { return nil }
	tests := map[string]struct {
		a     *sglang.Adapter
		req   sdk.GenerateRequest
		class error
		want  string
	}{
		"text prompt":      {a, sdk.GenerateRequest{RequestID: "r", Text: "hello"}, sdk.ErrInvalidArgument, "prompt: SGLang takes token ids only"},
		"token id too big": {a, sdk.GenerateRequest{RequestID: "r", TokenIDs: []uint32{1 << 31}}, sdk.ErrInvalidArgument, "prompt: 2147483648 is above"},
		"older server":     {old, sdk.GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}}, sdk.ErrUnavailable, "older sglang.grpc.scheduler.SglangScheduler API"},
		"seed":             {a, sdk.GenerateRequest{RequestID: "r", TokenIDs: []uint32{1}, Seed: &seed}, sdk.ErrInvalidArgument, "seed: SGLang's released sglang.runtime.v1 layout takes no sampling seed"},
		// The engine's own refusals, in its words.
		"input at the context length": {short, sdk.GenerateRequest{RequestID: "r", TokenIDs: make([]uint32, 8)}, sdk.ErrInvalidArgument,
			"The input (8 tokens) is longer than or equal to the model's context length (8 tokens)."},
		"input and output over the context length": {short, sdk.GenerateRequest{RequestID: "r", TokenIDs: make([]uint32, 5), MaxTokens: 3}, sdk.ErrInvalidArgument,
			"You requested a total of 8 tokens: 5 tokens from the input messages and 3 tokens for the completion."},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tt.a.Generate(t.Context(), tt.req, none)
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Generate() = %v, want %v containing %q", err, tt.class, tt.want)
			}
		})
	}
	t.Run("abort on an older server", func(t *testing.T) {
		if err := old.Abort(t.Context(), []string{"r"}); err != nil {
			t.Errorf("Abort() on an older server = %v, want nil: it runs no request of vigil's", err)
		}
	})
	t.Run("paused", func(t *testing.T) {
		post(t, e, "/pause", "")
		_, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "p", TokenIDs: []uint32{1}}, none)
		if !errors.Is(err, sdk.ErrUnavailable) {
			t.Errorf("Generate on a paused engine = %v, want ErrUnavailable", err)
		}
	})
}

// TestGenerateCancelAborts: a cancelled request is aborted by its rid.
func TestGenerateCancelAborts(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{TokenDelay: 10 * time.Millisecond})
	a := started(t, addr, nil)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := a.Generate(ctx, sdk.GenerateRequest{RequestID: "c1", TokenIDs: []uint32{1}, MaxTokens: 1000},
		func(sdk.Chunk) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Generate = %v, want context.Canceled", err)
	}
	if n := e.State().Aborts["c1"]; n != 1 {
		t.Errorf("aborts of c1 = %d, want 1", n)
	}
}

// TestGenerateMinTokensAndMinP: min_tokens and min_p reach the engine
// (SamplingParams.min_new_tokens, min_p): a stop token before min_tokens
// does not end the generation.
func TestGenerateMinTokensAndMinP(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{})
	a := started(t, addr, nil)
	prompt := []uint32{3, 4}
	stop := enginemock.OutputToken(0, prompt, 1)
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "m1", TokenIDs: prompt, MaxTokens: 6,
		StopTokenIDs: []uint32{stop}, MinTokens: 4, MinP: 0.25}, func(sdk.Chunk) error { return nil })
	if err != nil || res.CompletionTokens < 4 {
		t.Errorf("Generate(stop token 2nd, min_tokens 4) = %+v, %v; want at least 4 tokens", res, err)
	}
	if got := e.State().LastMinP; got != 0.25 {
		t.Errorf("engine's min_p = %v, want 0.25", got)
	}
}
