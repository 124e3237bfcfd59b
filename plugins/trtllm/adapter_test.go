package trtllm_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/trtllm"
	"github.com/vigilhq/vigil/plugins/trtllm/mock"
	"github.com/vigilhq/vigil/plugins/trtllm/trtllmpb"
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
	t.Parallel()
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
	want := sdk.Worker{ModelID: "/models/llama", ServedModelName: "/models/llama", EngineVersion: "1.0.0-mock", MaxModelLen: mock.MaxSeqLen,
		Accepts: "frequency_penalty,grammar.ebnf,ignore_eos,json_object,json_schema,logit_bias,logprobs=20,min_p,min_tokens," +
			"presence_penalty,prompt_logprobs=20,regex,repetition_penalty,seed,stop,structural_tag,top_k"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("worker (-want +got):\n%s", diff)
	}
}

// TestAcceptsWithoutVocabulary: a server that reports no vocab_size (no
// tokenizer) cannot be sent an embedding_bias of the right length, so
// logit_bias is neither listed nor taken.
func TestAcceptsWithoutVocabulary(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{VocabSize: -1})
	a := trtllm.New()
	defer a.Shutdown(context.Background())
	w, err := a.Start(t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: within, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	if items := strings.Split(w.Accepts, ","); slices.Contains(items, "logit_bias") || !slices.Contains(items, "json_schema") {
		t.Errorf("Accepts = %v, want the set without logit_bias", w.Accepts)
	}
	_, err = a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "b", TokenIDs: []uint32{1}, MaxTokens: 1, LogitBias: map[uint32]float32{1: 1}},
		func(sdk.Chunk) error { return nil })
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "logit_bias: ") {
		t.Errorf("Generate(logit_bias) without a vocabulary = %v, want ErrInvalidArgument naming logit_bias", err)
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
// generation.
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
}

// lastRequest reads back the engine's own message of the mock's last
// generation request (GET /state last_request).
func lastRequest(t *testing.T, e *mock.Engine) *trtllmpb.GenerateRequest {
	t.Helper()
	got := &trtllmpb.GenerateRequest{}
	if err := protojson.Unmarshal(e.State().LastRequest, got); err != nil {
		t.Fatalf("last_request %s: %v", e.State().LastRequest, err)
	}
	return got
}

// ok discards chunks.
func ok(sdk.Chunk) error { return nil }

// TestGenerateSamplingConfig: min_p and the penalties reach SamplingConfig
// (19, 12, 13, 14), read back from what the engine received; unset, they
// stay absent, so the server keeps its defaults (repetition_penalty 1.0).
func TestGenerateSamplingConfig(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{})
	a := started(t, addr)
	rp, mp, pp, fp := float32(1.3), float32(0.05), float32(0.5), float32(-0.5)
	req := sdk.GenerateRequest{RequestID: "s", TokenIDs: []uint32{1}, MaxTokens: 1,
		MinP: mp, PresencePenalty: pp, FrequencyPenalty: fp, RepetitionPenalty: &rp}
	if _, err := a.Generate(t.Context(), req, ok); err != nil {
		t.Fatal(err)
	}
	want := &trtllmpb.SamplingConfig{MinP: &mp, PresencePenalty: &pp, FrequencyPenalty: &fp, RepetitionPenalty: &rp}
	if diff := cmp.Diff(want, lastRequest(t, e).GetSamplingConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("sampling_config (-want +got):\n%s", diff)
	}
	if got := e.State().LastMinP; got != mp {
		t.Errorf("engine's min_p = %v, want %v", got, mp)
	}
	if _, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "u", TokenIDs: []uint32{1}, MaxTokens: 1}, ok); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&trtllmpb.SamplingConfig{}, lastRequest(t, e).GetSamplingConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("sampling_config of a request without them (-want +got):\n%s", diff)
	}
}

// TestGenerateGuidedDecoding: each structured output reaches
// guided_decoding (11) with its guide type; json_object carries the guide
// "{}", since the server applies a guide only when its text is non-empty.
func TestGenerateGuidedDecoding(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{})
	a := started(t, addr)
	type G = trtllmpb.GuidedDecodingParams
	tests := map[string]struct {
		so   sdk.StructuredOutput
		want *G
	}{
		"json object":    {sdk.StructuredOutput{Kind: sdk.StructuredJSONObject}, &G{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON, Guide: "{}"}},
		"json schema":    {sdk.StructuredOutput{Kind: sdk.StructuredJSONSchema, Text: `{"type":"object"}`}, &G{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON_SCHEMA, Guide: `{"type":"object"}`}},
		"regex":          {sdk.StructuredOutput{Kind: sdk.StructuredRegex, Text: `(yes|no)`}, &G{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_REGEX, Guide: `(yes|no)`}},
		"grammar ebnf":   {sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "ebnf", Text: `root ::= "a"`}, &G{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_EBNF_GRAMMAR, Guide: `root ::= "a"`}},
		"structural tag": {sdk.StructuredOutput{Kind: sdk.StructuredTag, Text: `{"type":"structural_tag"}`}, &G{GuideType: trtllmpb.GuidedDecodingParams_GUIDE_TYPE_STRUCTURAL_TAG, Guide: `{"type":"structural_tag"}`}},
	}
	for name, tt := range tests {
		if _, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: name, TokenIDs: []uint32{1}, MaxTokens: 1, StructuredOutput: &tt.so}, ok); err != nil {
			t.Errorf("%s: Generate = %v", name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, lastRequest(t, e).GetGuidedDecoding(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: guided_decoding (-want +got):\n%s", name, diff)
		}
	}
}

// TestGenerateLogitBias: logit_bias becomes embedding_bias (12), a float
// per token id of the vocabulary that GetModelInfo reported.
func TestGenerateLogitBias(t *testing.T) {
	t.Parallel()
	e, addr := serveMock(t, "", mock.Config{VocabSize: 8})
	a := started(t, addr)
	req := sdk.GenerateRequest{RequestID: "b", TokenIDs: []uint32{1}, MaxTokens: 1, LogitBias: map[uint32]float32{2: 2.5, 7: -100}}
	if _, err := a.Generate(t.Context(), req, ok); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{0, 0, 2.5, 0, 0, 0, 0, -100}, lastRequest(t, e).GetEmbeddingBias()); diff != "" {
		t.Errorf("embedding_bias (-want +got):\n%s", diff)
	}
}

// TestGenerateStructuredRefused: what TensorRT-LLM cannot take is
// INVALID_ARGUMENT naming the field, not dropped: a token id outside the
// vocabulary, choice (no guide type; the host sends a regex), a grammar in
// another dialect than EBNF, and an empty guide, which the server would
// ignore.
func TestGenerateStructuredRefused(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{VocabSize: 8})
	a := started(t, addr)
	tests := map[string]struct {
		req  sdk.GenerateRequest
		want string
	}{
		"token id 8 of 8": {sdk.GenerateRequest{LogitBias: map[uint32]float32{8: 1}}, "logit_bias: token id 8 is outside the vocabulary of 8"},
		"choice":          {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredChoice, Choices: []string{"a"}}}, "choice: "},
		"lark":            {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredGrammar, Dialect: "lark", Text: "start: \"a\""}}, `grammar: dialect "lark"`},
		"empty regex":     {sdk.GenerateRequest{StructuredOutput: &sdk.StructuredOutput{Kind: sdk.StructuredRegex}}, "regex: empty"},
	}
	for name, tt := range tests {
		req := tt.req
		req.RequestID, req.TokenIDs, req.MaxTokens = name, []uint32{1}, 1
		_, err := a.Generate(t.Context(), req, ok)
		if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "invalid argument: "+tt.want) {
			t.Errorf("%s: Generate = %v, want ErrInvalidArgument naming %q", name, err, tt.want)
		}
	}
}

// TestGenerateCachedTokens: the complete message's cached_tokens is the
// result's.
func TestGenerateCachedTokens(t *testing.T) {
	t.Parallel()
	_, addr := serveMock(t, "", mock.Config{CachedTokens: 2})
	a := started(t, addr)
	res, err := a.Generate(t.Context(), sdk.GenerateRequest{RequestID: "c", TokenIDs: []uint32{1, 2, 3}, MaxTokens: 1}, ok)
	if err != nil || res.CachedTokens != 2 {
		t.Errorf("Generate = %+v, %v; want 2 cached tokens", res, err)
	}
}

// TestWireNumbers: the vendored fields beyond the basic subset carry the
// SMG adapter's numbers (smg's trtllm_service.proto).
func TestWireNumbers(t *testing.T) {
	t.Parallel()
	want := map[string]protoreflect.FieldNumber{
		"trtllm.GenerateRequest.guided_decoding": 11, "trtllm.GenerateRequest.embedding_bias": 12,
		"trtllm.SamplingConfig.repetition_penalty": 12, "trtllm.SamplingConfig.presence_penalty": 13,
		"trtllm.SamplingConfig.frequency_penalty": 14, "trtllm.SamplingConfig.min_p": 19,
		"trtllm.GuidedDecodingParams.guide_type": 1, "trtllm.GuidedDecodingParams.guide": 2,
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
	types := map[trtllmpb.GuidedDecodingParams_GuideType]int32{
		trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON: 1, trtllmpb.GuidedDecodingParams_GUIDE_TYPE_JSON_SCHEMA: 2,
		trtllmpb.GuidedDecodingParams_GUIDE_TYPE_REGEX: 3, trtllmpb.GuidedDecodingParams_GUIDE_TYPE_EBNF_GRAMMAR: 4,
		trtllmpb.GuidedDecodingParams_GUIDE_TYPE_STRUCTURAL_TAG: 5,
	}
	for gt, n := range types {
		if int32(gt) != n {
			t.Errorf("%v = %d, want %d", gt, int32(gt), n)
		}
	}
}
