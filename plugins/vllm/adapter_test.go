package vllm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/vllm"
	"github.com/vigilhq/vigil/plugins/vllm/mock"
	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"github.com/vigilhq/vigil/sdk/sdktest"
)

// within bounds every wait for the adapter; it only decides when a hung
// test fails.
const within = 10 * time.Second

// health checks often, so losses through polling show quickly.
var health = sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: time.Second, Failures: 2, RetryMax: 50 * time.Millisecond}

// serveMock serves a mock vLLM engine on loopback and returns it with its
// address; it is stopped when the test ends.
func serveMock(t *testing.T, cfg mock.Config) (*mock.Engine, string) {
	t.Helper()
	return serveMockOn(t, "127.0.0.1:0", cfg)
}

// serveMockOn serves a mock vLLM engine on addr.
func serveMockOn(t *testing.T, addr string, cfg mock.Config) (*mock.Engine, string) {
	t.Helper()
	e := mock.New(cfg)
	return e, enginemock.Loopback(t, e.Engine, addr)
}

// TestConformance checks the adapter against the sdk contract in every
// mode, the built vigil-adapter-vllm too, with every hook the mock gives:
// its stop shuts down as vLLM does on SIGTERM, "" NOT_SERVING is failure,
// sleep is not ready.
func TestConformance(t *testing.T) {
	t.Parallel()
	engines := map[string]*mock.Engine{}
	sdktest.TestEngine(t, sdktest.Harness{
		Name:       vllm.Name,
		New:        func() sdk.Engine { return vllm.New() },
		Executable: build(t, "./cmd/vigil-adapter-vllm"),
		Serving: func(t *testing.T) (string, func()) {
			e, addr := serveMock(t, mock.Config{Model: "m"})
			engines[addr] = e
			return addr, e.Stop
		},
		// vLLM reports a failed engine NOT_SERVING and exits about 2 s
		// later; NOT_SERVING alone is a drain.
		Fail: func(t *testing.T, addr string) {
			setHealth(t, engines[addr], "", "NOT_SERVING")
			engines[addr].Stop()
		},
		NotReady:     func(t *testing.T, addr string) { post(t, engines[addr], "/sleep", "") },
		Ready:        func(t *testing.T, addr string) { post(t, engines[addr], "/wake", "") },
		Hold:         func(t *testing.T, addr string) { engines[addr].Hold(1); t.Cleanup(engines[addr].Release) },
		Aborted:      func(_ *testing.T, addr, id string) <-chan struct{} { return engines[addr].Aborted(id) },
		CheckLatency: func(_ *testing.T, addr string, d time.Duration) { engines[addr].SetCheckLatency(d) },
	})
}

// build builds the command pkg into the test's temporary directory and
// returns the executable's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	if testing.Short() {
		return "" // the executable mode is skipped
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if msg, err := exec.CommandContext(t.Context(), "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// setHealth pins a health service of the mock through its control surface.
func setHealth(t *testing.T, e *mock.Engine, service, status string) {
	t.Helper()
	post(t, e, "/health", fmt.Sprintf(`{"service": %q, "status": %q}`, service, status))
}

// post sends one control request to the mock and requires 200.
func post(t *testing.T, e *mock.Engine, path, body string) {
	t.Helper()
	enginemock.Post(t, e.Engine, path, body)
}

// started returns an adapter started against addr, shut down when the test
// ends.
func started(t *testing.T, addr string) *vllm.Adapter {
	t.Helper()
	a := vllm.New()
	sdktest.Start(t, a, sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	return a
}

func TestStartWorker(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{Model: "org/model", InstanceID: "feedface", MaxModelLen: 8192, KVBlockSize: 32})
	want := sdk.Worker{
		ModelID:           "org/model",
		ServedModelName:   "org/model",
		EngineVersion:     "0.33.0-mock",
		InstanceID:        "feedface",
		MaxModelLen:       8192,
		KVBlockSize:       32,
		SupportsTextInput: true,
		Accepts: "choice,frequency_penalty,grammar.ebnf,grammar.lark,ignore_eos,json_object,json_schema," +
			"logit_bias,min_p,min_tokens,presence_penalty,regex,repetition_penalty,seed,stop,structural_tag,top_k," +
			"logprobs=20,prompt_logprobs=20",
	}
	if diff := cmp.Diff(want, startWorker(t, addr)); diff != "" {
		t.Errorf("Start() worker mismatch (-want +got):\n%s", diff)
	}
}

// TestStartWorkerParsers: the parser names vLLM reports in ModelInfo (its
// --reasoning-parser and --tool-call-parser) are the worker's defaults;
// without them the worker names none.
func TestStartWorkerParsers(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ reasoning, toolCall string }{
		"both":           {"qwen3", "hermes"},
		"reasoning only": {"deepseek_r1", ""},
		"tool call only": {"", "llama3_json"},
		"none":           {"", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := serveMock(t, mock.Config{Model: "m", ReasoningParser: tt.reasoning, ToolCallParser: tt.toolCall})
			got := startWorker(t, addr)
			if got.ReasoningParser != tt.reasoning || got.ToolCallParser != tt.toolCall {
				t.Errorf("Start() parsers = %q, %q, want %q, %q", got.ReasoningParser, got.ToolCallParser, tt.reasoning, tt.toolCall)
			}
		})
	}
}

// startWorker starts an adapter against addr and returns its worker.
func startWorker(t *testing.T, addr string) sdk.Worker {
	t.Helper()
	a := vllm.New()
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	got, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	if err != nil {
		t.Fatalf("Start() error = %v, want nil", err)
	}
	return got
}

// TestStartWaitsForModelLoad: vLLM listens before its model is loaded;
// Start waits until Control and Inference serve.
func TestStartWaitsForModelLoad(t *testing.T) {
	t.Parallel()
	const loading = 300 * time.Millisecond
	e, addr := serveMock(t, mock.Config{Model: "m", StartupDelay: loading})
	a := vllm.New()
	defer a.Shutdown(context.Background())
	if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health}); err != nil {
		t.Fatalf("Start() error = %v, want nil", err)
	}
	select {
	case <-e.Ready():
	default:
		t.Error("Start returned before the engine was ready")
	}
}

func TestStartInvalid(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		req  sdk.StartRequest
		want string // in the error message
	}{
		"unknown option": {
			req:  sdk.StartRequest{EngineAddr: "127.0.0.1:1", Options: map[string]string{"tp": "2"}},
			want: `StartRequest.Options "tp": unknown key`,
		},
		"negative startup deadline": {
			req:  sdk.StartRequest{EngineAddr: "127.0.0.1:1", StartupDeadline: -time.Second},
			want: "StartRequest.StartupDeadline -1s",
		},
		"negative health interval": {
			req:  sdk.StartRequest{EngineAddr: "127.0.0.1:1", Health: sdk.HealthPolicy{Interval: -time.Second}},
			want: "HealthPolicy.Interval -1s",
		},
		"no port": {
			req:  sdk.StartRequest{EngineAddr: "localhost"},
			want: `StartRequest.EngineAddr "localhost"`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := vllm.New()
			defer a.Shutdown(context.Background())
			_, err := a.Start(t.Context(), tt.req)
			var fe *sdk.FieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start(%+v) error = %v, want a *sdk.FieldError naming %s", tt.req, err, tt.want)
			}
		})
	}
}

// TestStartWaitsForLiveness: an engine whose "" reports NOT_SERVING while
// "vllm.Control" and "vllm.Inference" serve has failed; Start must not
// report it serving (the worker would be registered and withdrawn at once),
// and waits until the startup deadline, naming the service.
func TestStartWaitsForLiveness(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	setHealth(t, e, "", "NOT_SERVING")
	a := vllm.New()
	defer a.Shutdown(context.Background())
	_, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 300 * time.Millisecond, Health: health})
	if want := `health of "": not serving: NOT_SERVING`; !errors.Is(err, sdk.ErrStartupDeadline) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start() = %v, want ErrStartupDeadline naming %s", err, want)
	}
}

// TestEngineReplaced: with a health Watch that does not stream, an engine
// killed and restarted on the same address with a new instance id is
// noticed by the connection alone (polling is off here) and is Lost.
func TestEngineReplaced(t *testing.T) {
	t.Parallel()
	noPolling := health
	noPolling.Interval = time.Hour
	for _, mode := range []mock.WatchMode{mock.WatchOnce, mock.WatchUnimplemented, mock.WatchSilent} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			old, addr := serveMock(t, mock.Config{Model: "m", InstanceID: "old", WatchMode: mode})
			a := vllm.New()
			t.Cleanup(func() { a.Shutdown(context.Background()) })
			if _, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: noPolling}); err != nil {
				t.Fatal(err)
			}
			events := sdktest.Watch(t, a)
			events.Expect(sdk.Serving, "vLLM engine serving")

			old.Stop()
			serveMockOn(t, addr, mock.Config{Model: "m", InstanceID: "new", WatchMode: mode})
			// Stop reports every service NOT_SERVING first, as vLLM does
			// (a drain; a check racing it may see "vllm.Inference" go
			// first); the new lifetime id is the loss.
			if ev := nextLost(events); ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, "vLLM engine lost") {
				t.Fatalf("event after the engine was replaced = %v %q, want Lost", ev.Availability, ev.Reason)
			}
			events.Closed()
		})
	}
}

// TestNotReady: "vllm.Inference" NOT_SERVING while "" serves is an engine
// that is alive but takes no work; it serves again when restored.
func TestNotReady(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	events := sdktest.Watch(t, started(t, addr))

	events.Expect(sdk.Serving, "vLLM engine serving")
	setHealth(t, e, "vllm.Inference", "NOT_SERVING")
	events.Expect(sdk.NotReady, "vLLM engine not ready")
	setHealth(t, e, "vllm.Inference", "SERVING")
	events.Expect(sdk.Serving, "vLLM engine serving")
}

// TestSleepIsNotReady: a sleeping or paused engine is NotReady, as later
// vLLM releases report it, and Serving again when woken or resumed.
func TestSleepIsNotReady(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	events := sdktest.Watch(t, started(t, addr))

	events.Expect(sdk.Serving, "vLLM engine serving")
	post(t, e, "/sleep", "")
	events.Expect(sdk.NotReady, "vLLM engine not ready")
	post(t, e, "/wake", "")
	events.Expect(sdk.Serving, "vLLM engine serving")
	post(t, e, "/pause", "")
	events.Expect(sdk.NotReady, "vLLM engine not ready")
	post(t, e, "/resume", "")
	events.Expect(sdk.Serving, "vLLM engine serving")
}

// nextLost skips the NotReady and Draining events an engine's Stop may
// give before it is Lost, and returns the next.
func nextLost(events *sdktest.Events) sdk.Event {
	for {
		if ev := events.Next(); ev.Availability != sdk.NotReady && ev.Availability != sdk.Draining {
			return ev
		}
	}
}

// TestDrainingWhenServerNotServing: "" NOT_SERVING while the connection
// and the lifetime id hold is vLLM draining on purpose (its shutdown grace
// period): Draining, and the watch goes on; the engine gone is Lost.
func TestDrainingWhenServerNotServing(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	events := sdktest.Watch(t, started(t, addr))

	events.Expect(sdk.Serving, "vLLM engine serving")
	post(t, e, "/drain", "")
	// Every service turns NOT_SERVING, "vllm.Inference" possibly seen first.
	ev := events.Next()
	if ev.Availability == sdk.NotReady {
		ev = events.Next()
	}
	if ev.Availability != sdk.Draining || ev.Reason != `vLLM engine draining: health of "" is NOT_SERVING` {
		t.Fatalf("event after the drain began = %v %q, want Draining", ev.Availability, ev.Reason)
	}
	e.Stop()
	if ev := events.Next(); ev.Availability != sdk.Lost {
		t.Fatalf("event after the draining engine stopped = %v %q, want Lost", ev.Availability, ev.Reason)
	}
	events.Closed()
}

// TestLostAfterStop: however the engine's Watch behaves, an engine that
// shuts down is Lost.
func TestLostAfterStop(t *testing.T) {
	t.Parallel()
	for _, mode := range []mock.WatchMode{mock.WatchNormal, mock.WatchOnce, mock.WatchUnimplemented, mock.WatchSilent} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e, addr := serveMock(t, mock.Config{Model: "m", WatchMode: mode})
			events := sdktest.Watch(t, started(t, addr))

			events.Expect(sdk.Serving, "vLLM engine serving")
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				e.Stop() // waits for open Watch streams, which end with the test
			}()
			t.Cleanup(func() {
				select {
				case <-stopped:
				case <-time.After(within):
					t.Errorf("mock Stop() did not return within %v", within)
				}
			})
			// Lost may follow a NotReady and a Draining: Stop turns every
			// service NOT_SERVING, in no set order, before it goes.
			ev := nextLost(events)
			if ev.Availability != sdk.Lost || !strings.HasPrefix(ev.Reason, "vLLM engine lost") {
				t.Fatalf("event after Stop = %v %q, want %v with a reason starting %q", ev.Availability, ev.Reason, sdk.Lost, "vLLM engine lost")
			}
			events.Closed()
		})
	}
}

// TestStartAgainAfterFailure: a Start that failed leaves the adapter as it
// was, so a second Start against a serving engine succeeds.
func TestStartAgainAfterFailure(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	a := vllm.New()
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	_, err = a.Start(context.Background(), sdk.StartRequest{EngineAddr: closed, StartupDeadline: 100 * time.Millisecond})
	if !errors.Is(err, sdk.ErrStartupDeadline) {
		t.Fatalf("Start against nothing = %v, want ErrStartupDeadline", err)
	}
	_, addr := serveMock(t, mock.Config{Model: "m"})
	if _, err := a.Start(context.Background(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: 10 * time.Second}); err != nil {
		t.Fatalf("second Start = %v, want nil", err)
	}
}

// TestGenerate: output is relayed chunk by chunk with vLLM's usage and
// finish reason.
func TestGenerate(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{Model: "m"})
	a := started(t, addr)
	var got []uint32
	var text string
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "g1", TokenIDs: []uint32{3, 4}, MaxTokens: 5},
		func(c sdk.Chunk) error {
			got = append(got, c.TokenIDs...)
			text += c.Text
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	var wantText string
	for i := range 5 {
		id := mock.OutputToken(0, []uint32{3, 4}, i)
		want = append(want, id)
		wantText += mock.TokenText(id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if text != wantText {
		t.Errorf("text = %q, want %q", text, wantText)
	}
	if res != (sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 2, CompletionTokens: 5}) {
		t.Errorf("result = %+v, want length, 2 prompt and 5 completion tokens", res)
	}
}

// TestGenerateCancelAborts: a cancelled request is aborted by its id.
func TestGenerateCancelAborts(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m", TokenDelay: 10 * time.Millisecond})
	a := started(t, addr)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := a.Generate(ctx, sdk.GenerateRequest{RequestID: "c1", TokenIDs: []uint32{1}, MaxTokens: 1000},
		func(sdk.Chunk) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Generate = %v, want context.Canceled", err)
	}
	if n := e.State().Aborts["c1"]; n != 1 {
		t.Errorf("aborts of c1 = %d, want 1 (Generate returns after the Abort)", n)
	}
}

// TestGenerateUnavailable: a sleeping engine refuses with ErrUnavailable,
// so the host can answer UNAVAILABLE and a router retry elsewhere.
func TestGenerateUnavailable(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	a := started(t, addr)
	post(t, e, "/sleep", "")
	_, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "u1", TokenIDs: []uint32{1}, MaxTokens: 1},
		func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("Generate on a sleeping engine = %v, want ErrUnavailable", err)
	}
}

// TestGenerateMinTokensAndMinP: min_tokens and min_p reach the engine
// (StoppingCriteria.min_new_tokens, RandomSampling.min_p): a stop token
// before min_tokens does not end the generation.
func TestGenerateMinTokensAndMinP(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	a := started(t, addr)
	prompt := []uint32{3, 4}
	stop := mock.OutputToken(0, prompt, 1)
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "m1", TokenIDs: prompt, MaxTokens: 6,
		StopTokenIDs: []uint32{stop}, MinTokens: 4, MinP: 0.25}, func(sdk.Chunk) error { return nil })
	if err != nil || res.CompletionTokens < 4 {
		t.Errorf("Generate(stop token 2nd, min_tokens 4) = %+v, %v; want at least 4 tokens", res, err)
	}
	if got := e.State().LastMinP; got != 0.25 {
		t.Errorf("engine's min_p = %v, want 0.25", got)
	}
}

// lastRequest reads back the engine's own message of the mock's last
// generation request (GET /state last_request).
func lastRequest(t *testing.T, e *mock.Engine) *vllmpb.GenerateRequest {
	t.Helper()
	got := &vllmpb.GenerateRequest{}
	if err := protojson.Unmarshal(e.State().LastRequest, got); err != nil {
		t.Fatalf("last_request %s: %v", e.State().LastRequest, err)
	}
	return got
}

// TestGenerateDecoding: the penalties, logit bias and every kind of
// structured output reach vLLM's DecodingParameters (GenerateRequest field
// 7), read back from what the engine received; a request with none of
// them sends no DecodingParameters, as before.
func TestGenerateDecoding(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, mock.Config{Model: "m"})
	a := started(t, addr)
	rp := float32(1.2)
	so := func(o sdk.StructuredOutput) sdk.GenerateRequest { return sdk.GenerateRequest{StructuredOutput: &o} }
	type D = vllmpb.DecodingParameters
	tests := map[string]struct {
		req  sdk.GenerateRequest
		want *D
	}{
		"none": {sdk.GenerateRequest{}, nil},
		"penalties": {sdk.GenerateRequest{PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: &rp},
			&D{PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: 1.2}},
		"logit bias": {sdk.GenerateRequest{LogitBias: map[uint32]float32{7: -100, 9: 2.5}},
			&D{LogitBias: map[uint32]float32{7: -100, 9: 2.5}}},
		"json object": {so(sdk.StructuredOutput{Kind: sdk.StructuredJSONObject}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_JsonObject{JsonObject: true}}},
		"json schema": {so(sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: `{"type":"object"}`}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_Json{Json: `{"type":"object"}`}}},
		"regex": {so(sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: `a+`}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_Regex{Regex: `a+`}}},
		"choice": {so(sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: []string{"yes", "no"}}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_Choice{Choice: &vllmpb.DecodingParameters_StringChoices{Choices: []string{"yes", "no"}}}}},
		"grammar ebnf": {so(sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "ebnf", Text: `root ::= "a"`}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_Grammar{Grammar: `root ::= "a"`}}},
		"grammar lark": {so(sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "lark", Text: `start: "a"`}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_Grammar{Grammar: `start: "a"`}}},
		"structural tag": {so(sdk.StructuredOutput{Kind: sdk.StructuredTag, Text: `{"type":"structural_tag"}`}),
			&D{StructuredOutput: &vllmpb.DecodingParameters_StructuralTag{StructuralTag: `{"type":"structural_tag"}`}}},
	}
	for name, tt := range tests {
		req := tt.req
		req.RequestID, req.TokenIDs, req.MaxTokens = name, []uint32{1, 2}, 1
		if _, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil }); err != nil {
			t.Errorf("%s: Generate = %v", name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, lastRequest(t, e).GetDecoding(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: decoding (-want +got):\n%s", name, diff)
		}
	}
}

// TestDecodingWireNumbers: the vendored DecodingParameters and
// FinishInfo.num_cached_tokens carry vLLM's numbers (rust/proto/inference.proto;
// num_cached_tokens from vllm-proto 0.6).
func TestDecodingWireNumbers(t *testing.T) {
	t.Parallel()
	want := map[string]protoreflect.FieldNumber{
		"vllm.GenerateRequest.decoding": 7, "vllm.DecodingParameters.presence_penalty": 1,
		"vllm.DecodingParameters.frequency_penalty": 2, "vllm.DecodingParameters.repetition_penalty": 3,
		"vllm.DecodingParameters.logit_bias": 4, "vllm.DecodingParameters.json": 6, "vllm.DecodingParameters.regex": 7,
		"vllm.DecodingParameters.choice": 8, "vllm.DecodingParameters.grammar": 9, "vllm.DecodingParameters.json_object": 10,
		"vllm.DecodingParameters.structural_tag": 11, "vllm.DecodingParameters.StringChoices.choices": 1,
		"vllm.FinishInfo.num_cached_tokens": 9,
	}
	for name, n := range want {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := d.(protoreflect.FieldDescriptor).Number(); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
}

// TestGenerateDecodingRefused: what vLLM cannot take is INVALID_ARGUMENT
// naming the field: a repetition penalty of 0 (vLLM reads 0 as unset) and
// an unknown grammar dialect by the adapter; a blank grammar and a schema
// that is not JSON by the engine, in its words.
func TestGenerateDecodingRefused(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, mock.Config{Model: "m"})
	a := started(t, addr)
	zero := float32(0)
	tests := map[string]struct {
		req  sdk.GenerateRequest
		want string
	}{
		"repetition penalty 0": {sdk.GenerateRequest{RepetitionPenalty: &zero}, "invalid argument: repetition_penalty: 0"},
		"grammar dialect": {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "gbnf", Text: "x"}},
			`invalid argument: grammar: dialect "gbnf"`},
		"blank grammar": {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "ebnf", Text: " "}},
			"vLLM rejected the request: grammar must not be blank"},
		"schema not JSON": {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: "{"}},
			"vLLM rejected the request: invalid json schema: "},
	}
	for name, tt := range tests {
		req := tt.req
		req.RequestID, req.TokenIDs, req.MaxTokens = name, []uint32{1}, 1
		_, err := a.Generate(t.Context(), req, func(sdk.Chunk) error { return nil })
		if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Generate = %v, want ErrInvalidArgument with %q", name, err, tt.want)
		}
	}
}

// TestGenerateCachedTokens: FinishInfo.num_cached_tokens (vllm-proto 0.6)
// is the result's cached tokens; an older vLLM, without it, reports 0.
func TestGenerateCachedTokens(t *testing.T) {
	t.Parallel()
	for _, cached := range []uint32{0, 3} {
		_, addr := serveMock(t, mock.Config{Model: "m", CachedTokens: cached})
		a := started(t, addr)
		res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "c", TokenIDs: []uint32{1, 2, 3, 4}, MaxTokens: 2},
			func(sdk.Chunk) error { return nil })
		if err != nil || res.CachedTokens != cached || res.PromptTokens != 4 {
			t.Errorf("engine reporting %d cached: result %+v, %v; want %d cached of 4 prompt tokens", cached, res, err, cached)
		}
	}
}
