package trtllm_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigilhq/vigil/plugins/trtllm"
	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// within bounds every wait for the adapter; it only decides when a hung
// test fails.
const within = 10 * time.Second

// health polls often with a short deadline, so polled losses show quickly.
var health = sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond, Failures: 2, RetryMax: 50 * time.Millisecond, BusyTimeout: time.Second}

// serveMock serves a mock TensorRT-LLM engine on addr ("" for a fresh
// port); it is stopped when the test ends.
func serveMock(t *testing.T, addr string, cfg mock.Config) (*mock.Engine, string) {
	t.Helper()
	e := mock.New(cfg)
	return e, enginemock.Loopback(t, e.Engine, addr)
}

// post sends one control request to the mock and requires 200.
func post(t *testing.T, e *mock.Engine, path, body string) {
	t.Helper()
	enginemock.Post(t, e.Engine, path, body)
}

// started returns an adapter started against addr, shut down when the test
// ends.
func started(t *testing.T, addr string) *trtllm.Adapter {
	t.Helper()
	a := trtllm.New()
	sdktest.Start(t, a, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	return a
}

// TestConformance checks the adapter against the sdk contract in every
// mode (the test binary standing in for the executable, see TestMain),
// with every hook the mock gives: a crashed rank is failure; TensorRT-LLM
// has no not-ready state.
func TestConformance(t *testing.T) {
	engines := map[string]*mock.Engine{}
	sdktest.TestEngine(t, sdktest.Harness{
		Name:       trtllm.Name,
		New:        func() sdk.Engine { return trtllm.New() },
		Executable: os.Args[0],
		Serving: func(t *testing.T) (string, func()) {
			e, addr := serveMock(t, "", mock.Config{Model: "m"})
			engines[addr] = e
			return addr, e.Stop
		},
		Fail:         func(t *testing.T, addr string) { post(t, engines[addr], "/health", `{"status": "NOT_SERVING"}`) },
		Hold:         func(t *testing.T, addr string) { engines[addr].Hold(1); t.Cleanup(engines[addr].Release) },
		Aborted:      func(_ *testing.T, addr, id string) <-chan struct{} { return engines[addr].Aborted(id) },
		CheckLatency: func(_ *testing.T, addr string, d time.Duration) { engines[addr].SetCheckLatency(d) },
	})
}

func TestStartWorker(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{Model: "/models/llama"})
	a := trtllm.New()
	defer a.Shutdown(context.Background())
	got, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	// The server has no served name: model_id, often a path, stands in.
	want := sdk.Worker{ModelID: "/models/llama", ServedModelName: "/models/llama", EngineVersion: "1.0.0-mock", MaxModelLen: mock.MaxSeqLen}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("worker (-want +got):\n%s", diff)
	}
}

// TestStartWaits: Start waits until HealthCheck answers "OK"; an engine
// stuck unhealthy, or whose HealthCheck hangs, is never reported serving.
func TestStartWaits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode mock.HealthMode
		want string
	}{
		{mock.HealthUnhealthy, `HealthCheck: status "unhealthy: rank 1 crashed (mock)"`},
		{mock.HealthHang, "HealthCheck: rpc error: code = DeadlineExceeded"},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, "", mock.Config{Health: tt.mode})
			a := trtllm.New()
			defer a.Shutdown(context.Background())
			_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 500 * time.Millisecond, Health: health})
			if !errors.Is(err, sdk.ErrStartupDeadline) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start() = %v, want ErrStartupDeadline naming %s", err, tt.want)
			}
		})
	}
}

// TestLost: polled HealthCheck failing Failures times in a row (unhealthy,
// or no answer within the deadline) is Lost, as is the connection closing:
// with no lifetime id a restarted engine cannot be told apart.
func TestLost(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		lose func(t *testing.T, e *mock.Engine, addr string)
		busy bool // busy first: the transport answers PINGs
		want string
	}{
		"crashed rank, process up": {
			lose: func(t *testing.T, e *mock.Engine, _ string) { post(t, e, "/health", `{"status": "NOT_SERVING"}`) },
			want: `TensorRT-LLM engine lost: HealthCheck: 2 checks failed in a row, last: status "unhealthy: executor error (mock)"`,
		},
		// A HealthCheck that never answers, its transport alive, is busy
		// until the busy timeout.
		"hung HealthCheck": {
			lose: func(t *testing.T, e *mock.Engine, _ string) { post(t, e, "/health-check", `{"mode": "hang"}`) },
			busy: true,
			want: "TensorRT-LLM engine lost: HealthCheck: 2 checks failed in a row, last: rpc error: code = DeadlineExceeded",
		},
		// Stop reports unhealthy just before it closes connections, so a
		// poll may see that first; the e2e test kills the process, which
		// leaves the connection alone to tell.
		"restarted on the same port": {
			lose: func(t *testing.T, e *mock.Engine, addr string) {
				e.Stop()
				serveMock(t, addr, mock.Config{})
			},
			want: "TensorRT-LLM engine lost: ",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, addr := serveMock(t, "", mock.Config{})
			events := sdktest.Watch(t, started(t, addr))
			events.Expect(sdk.Serving, "TensorRT-LLM engine serving")
			tt.lose(t, e, addr)
			if tt.busy {
				if ev := events.Next(); ev.Availability != sdk.Serving || !ev.Busy {
					t.Fatalf("event = %v (busy %v) %q, want Serving, busy", ev.Availability, ev.Busy, ev.Reason)
				}
			}
			events.Expect(sdk.Lost, tt.want)
			events.Closed()
		})
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{TokensPerMessage: 2})
	a := started(t, addr)
	prompt := []uint32{3, 4}
	seed := int64(9)
	var got []uint32
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g1", TokenIDs: prompt, MaxTokens: 5, Seed: &seed}, func(c sdk.Chunk) error {
		got = append(got, c.TokenIDs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for i := range 5 {
		want = append(want, enginemock.OutputToken(seed, prompt, i))
	}
	// The complete message repeats every token: none is sent twice.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if res != (sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 2, CompletionTokens: 5}) {
		t.Errorf("result = %+v, want length, 2 prompt and 5 completion tokens", res)
	}
	stop := enginemock.OutputToken(0, prompt, 1)
	res, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g2", TokenIDs: prompt, MaxTokens: 5, StopTokenIDs: []uint32{stop}}, func(sdk.Chunk) error { return nil })
	if err != nil || res.FinishReason != sdk.FinishStop || res.CompletionTokens != 2 {
		t.Errorf("Generate with a stop token = %+v, %v; want stop after 2 tokens", res, err)
	}
	// Without max_tokens, which TensorRT-LLM requires, the rest of the
	// model's length is asked for.
	res, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g3", TokenIDs: prompt}, func(sdk.Chunk) error { return nil })
	if err != nil || res.CompletionTokens != mock.MaxSeqLen-2 {
		t.Errorf("Generate without max_tokens = %+v, %v; want %d tokens", res, err, mock.MaxSeqLen-2)
	}
}

func TestGenerateRefused(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{})
	a := started(t, addr)
	_, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "r", Text: "hello"}, func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "prompt: TensorRT-LLM takes token ids only") {
		t.Errorf("Generate(text) = %v, want ErrInvalidArgument naming prompt", err)
	}
	// The engine's own refusal of a prompt over max_input_len, in its words.
	_, shortAddr := serveMock(t, "", mock.Config{MaxSeqLen: 16, MaxInputLen: 8})
	short := started(t, shortAddr)
	_, err = short.Generate(t.Context(), sdk.GenerateRequest{RequestID: "r", TokenIDs: make([]uint32, 9), MaxTokens: 1}, func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "Prompt length (9) exceeds maximum input length (8).") {
		t.Errorf("Generate(9 tokens over max_input_len 8) = %v, want ErrInvalidArgument in TensorRT-LLM's words", err)
	}
	// max_tokens beyond max_seq_len is shortened, as the executor does.
	res, err := short.Generate(t.Context(), sdk.GenerateRequest{RequestID: "r2", TokenIDs: make([]uint32, 8), MaxTokens: 100}, func(sdk.Chunk) error { return nil })
	if err != nil || res.CompletionTokens != 8 || res.FinishReason != sdk.FinishLength {
		t.Errorf("Generate(8 + 100 tokens, max_seq_len 16) = %+v, %v; want 8 tokens, length", res, err)
	}
}

// TestGenerateCancelAborts: a cancelled request is aborted by its id.
func TestGenerateCancelAborts(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{TokenDelay: 10 * time.Millisecond})
	a := started(t, addr)
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

// TestGenerateMinTokens: min_tokens reaches the engine
// (SamplingConfig.min_tokens): a stop token before it does not end the
// generation. TensorRT-LLM has no min_p: a non-zero one is refused naming
// it, not dropped.
func TestGenerateMinTokens(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{})
	a := started(t, addr)
	prompt := []uint32{3, 4}
	stop := enginemock.OutputToken(0, prompt, 1)
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "m1", TokenIDs: prompt, MaxTokens: 6,
		StopTokenIDs: []uint32{stop}, MinTokens: 4}, func(sdk.Chunk) error { return nil })
	if err != nil || res.CompletionTokens < 4 {
		t.Errorf("Generate(stop token 2nd, min_tokens 4) = %+v, %v; want at least 4 tokens", res, err)
	}
	_, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "m2", TokenIDs: prompt, MaxTokens: 1, MinP: 0.25}, func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid argument: "), "min_p:") {
		t.Errorf("Generate(min_p 0.25) = %v, want ErrInvalidArgument naming min_p", err)
	}
}
