package mock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
)

const (
	serving    = healthpb.HealthCheckResponse_SERVING
	notServing = healthpb.HealthCheckResponse_NOT_SERVING
	unknownSvc = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
)

// harness is one engine served on loopback with clients for all its surfaces.
type harness struct {
	e      *Engine
	ctx    context.Context
	served chan error // Serve's result
	url    string     // control surface
	health healthpb.HealthClient
	inf    vllmpb.InferenceClient
	ctl    vllmpb.ControlClient
}

func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{e: New(cfg), served: make(chan error, 1)}
	go func() { h.served <- h.e.Serve(lis) }()
	t.Cleanup(func() {
		h.e.Stop()
		if err := <-h.served; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // before Stop: open Watch streams end here
	srv := httptest.NewServer(h.e.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	h.ctx, h.url = ctx, srv.URL
	h.health = healthpb.NewHealthClient(conn)
	h.inf = vllmpb.NewInferenceClient(conn)
	h.ctl = vllmpb.NewControlClient(conn)
	return h
}

// post sends a control request and returns the status code and decoded body.
func (h *harness) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(h.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return decodeResp(t, resp)
}

func (h *harness) mustPost(t *testing.T, path, body string) {
	t.Helper()
	if code, got := h.post(t, path, body); code != http.StatusOK {
		t.Fatalf("POST %s %s = %d %v, want 200", path, body, code, got)
	}
}

func decodeResp(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decoding response: %v", err)
	}
	return resp.StatusCode, m
}

// state reads GET /state.
func (h *harness) state(t *testing.T) State {
	t.Helper()
	resp, err := http.Get(h.url + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s State
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decoding /state: %v", err)
	}
	return s
}

func (h *harness) watch(t *testing.T, svc string) healthpb.Health_WatchClient {
	t.Helper()
	w, err := h.health.Watch(h.ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// next is the next status a Watch sends.
func next(t *testing.T, w healthpb.Health_WatchClient) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := w.Recv()
	if err != nil {
		t.Fatalf("Watch Recv: %v", err)
	}
	return resp.GetStatus()
}

func (h *harness) check(t *testing.T, svc string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := h.health.Check(h.ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Fatalf("Check(%q): %v", svc, err)
	}
	return resp.GetStatus()
}

// stream runs GenerateStream to its end.
func (h *harness) stream(t *testing.T, req *vllmpb.GenerateRequest) ([]*vllmpb.GenerateResponse, error) {
	t.Helper()
	s, err := h.inf.GenerateStream(h.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*vllmpb.GenerateResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: got code %v (%v), want %v", what, got, err, want)
	}
}

func TestStartupDelay(t *testing.T) {
	t.Parallel()
	const delay = time.Second
	begin := time.Now()
	h := start(t, Config{StartupDelay: delay})

	// All three services start NOT_SERVING and turn SERVING after the delay.
	watches := make([]healthpb.Health_WatchClient, len(engineServices))
	for i, svc := range engineServices {
		watches[i] = h.watch(t, svc)
		if got := next(t, watches[i]); got != notServing {
			t.Fatalf("Watch(%q) first = %v, want NOT_SERVING", svc, got)
		}
	}
	for i, svc := range engineServices {
		if got := next(t, watches[i]); got != serving {
			t.Fatalf("Watch(%q) second = %v, want SERVING", svc, got)
		}
		if since := time.Since(begin); since < delay {
			t.Errorf("Watch(%q) SERVING after %v, want at least %v", svc, since, delay)
		}
	}
	select {
	case <-h.e.Ready():
	default:
		t.Error("Ready() not closed after SERVING")
	}
	if got, min := h.state(t).LastHealthChangeUnixNano, begin.Add(delay).UnixNano(); got < min {
		t.Errorf("last_health_change_unix_nano = %d, want at least %d", got, min)
	}
}

func TestBeforeStartup(t *testing.T) {
	t.Parallel()
	h := start(t, Config{StartupDelay: time.Hour})

	for _, svc := range engineServices {
		if got := h.check(t, svc); got != notServing {
			t.Errorf("Check(%q) = %v, want NOT_SERVING", svc, got)
		}
	}
	_, err := h.ctl.GetServerInfo(h.ctx, &vllmpb.GetServerInfoRequest{})
	wantCode(t, "GetServerInfo", err, codes.Unavailable)
	_, err = h.stream(t, &vllmpb.GenerateRequest{RequestId: "early"})
	wantCode(t, "GenerateStream", err, codes.Unavailable)
	select {
	case <-h.e.Ready():
		t.Error("Ready() closed before the startup delay")
	default:
	}
	want := map[string]string{"": "NOT_SERVING", "vllm.Control": "NOT_SERVING", "vllm.Inference": "NOT_SERVING"}
	if diff := cmp.Diff(want, h.state(t).Health); diff != "" {
		t.Errorf("/state health (-want +got):\n%s", diff)
	}
}

func TestSleepAndPause(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		enter, leave func(*testing.T, *harness)
		inState      func(State) bool
	}{
		"grpc sleep": {
			enter:   func(t *testing.T, h *harness) { rpc(t)(h.ctl.Sleep(h.ctx, &vllmpb.SleepRequest{})) },
			leave:   func(t *testing.T, h *harness) { rpc(t)(h.ctl.WakeUp(h.ctx, &vllmpb.WakeUpRequest{})) },
			inState: func(s State) bool { return s.Sleeping },
		},
		"grpc pause": {
			enter: func(t *testing.T, h *harness) { rpc(t)(h.ctl.PauseGeneration(h.ctx, &vllmpb.PauseGenerationRequest{})) },
			leave: func(t *testing.T, h *harness) {
				rpc(t)(h.ctl.ResumeGeneration(h.ctx, &vllmpb.ResumeGenerationRequest{}))
			},
			inState: func(s State) bool { return s.Paused },
		},
		"http sleep": {
			enter:   func(t *testing.T, h *harness) { h.mustPost(t, "/sleep", "") },
			leave:   func(t *testing.T, h *harness) { h.mustPost(t, "/wake", "") },
			inState: func(s State) bool { return s.Sleeping },
		},
		"http pause": {
			enter:   func(t *testing.T, h *harness) { h.mustPost(t, "/pause", "") },
			leave:   func(t *testing.T, h *harness) { h.mustPost(t, "/resume", "") },
			inState: func(s State) bool { return s.Paused },
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, Config{})
			w := h.watch(t, serviceInference)
			if got := next(t, w); got != serving {
				t.Fatalf("Inference first = %v, want SERVING", got)
			}

			// Inference follows readiness; "" and Control stay SERVING (vLLM after v0.33.0).
			tt.enter(t, h)
			if got := next(t, w); got != notServing {
				t.Fatalf("Inference after enter = %v, want NOT_SERVING", got)
			}
			for _, svc := range []string{serviceServer, serviceControl} {
				if got := h.check(t, svc); got != serving {
					t.Errorf("Check(%q) = %v, want SERVING", svc, got)
				}
			}
			if s := h.state(t); !tt.inState(s) {
				t.Errorf("/state = %+v, want sleeping or paused", s)
			}
			sleeping, err := h.ctl.IsSleeping(h.ctx, &vllmpb.IsSleepingRequest{})
			rpc(t)(sleeping, err)
			paused, err := h.ctl.IsPaused(h.ctx, &vllmpb.IsPausedRequest{})
			rpc(t)(paused, err)
			if !sleeping.GetSleeping() && !paused.GetPaused() {
				t.Error("IsSleeping and IsPaused both false, want one true")
			}
			_, err = h.stream(t, &vllmpb.GenerateRequest{RequestId: "r"})
			wantCode(t, "GenerateStream while not ready", err, codes.Unavailable)

			tt.leave(t, h)
			if got := next(t, w); got != serving {
				t.Fatalf("Inference after leave = %v, want SERVING", got)
			}
			if _, err := h.stream(t, &vllmpb.GenerateRequest{RequestId: "r"}); err != nil {
				t.Errorf("GenerateStream after leave: %v", err)
			}
		})
	}
}

// rpc fails the test on an RPC error: rpc(t)(client.Call(ctx, req)).
func rpc(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tokens are the first n output tokens for seed and prompt.
func tokens(seed int64, prompt []uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = OutputToken(seed, prompt, i)
	}
	return out
}

func text(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(TokenText(id))
	}
	return b.String()
}

// msgs builds the expected stream: chunks of per tokens, prompt info first, fin last.
func msgs(numPrompt uint32, ids []uint32, per int, withText, withIDs bool, fin *vllmpb.FinishInfo) []*vllmpb.GenerateResponse {
	var out []*vllmpb.GenerateResponse
	for i := 0; i < len(ids); i += per {
		chunk := ids[i:min(i+per, len(ids))]
		o := &vllmpb.SequenceOutput{NumTokens: uint32(len(chunk))}
		if withText {
			o.Text = text(chunk)
		}
		if withIDs {
			o.TokenIds = chunk
		}
		out = append(out, &vllmpb.GenerateResponse{Outputs: o})
	}
	out[0].PromptInfo = &vllmpb.PromptInfo{NumPromptTokens: numPrompt}
	out[len(out)-1].Outputs.FinishInfo = fin
	return out
}

func length(n uint32) *vllmpb.FinishInfo {
	return &vllmpb.FinishInfo{NumOutputTokens: n, FinishReason: vllmpb.FinishInfo_LENGTH}
}

func TestGenerateStream(t *testing.T) {
	t.Parallel()
	hi := []uint32{'h', 'i'}
	stopAt := tokens(0, []uint32{5}, 10)
	tests := map[string]struct {
		perMsg int
		req    *vllmpb.GenerateRequest
		want   []*vllmpb.GenerateResponse
	}{
		"token ids with seed": {
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{1, 2, 3}}},
				Sampling: &vllmpb.RandomSampling{Seed: proto.Int64(42)},
				Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 3},
				Response: &vllmpb.ResponseOptions{OutputTokenIds: true},
			},
			// 42 + 6*31 = 228; 228+100, 228+7919+100, 228+2*7919+100.
			want: msgs(3, []uint32{328, 8247, 16166}, 1, true, true, length(3)),
		},
		"text prompt, default max_new_tokens 20": {
			req:  &vllmpb.GenerateRequest{Prompt: &vllmpb.GenerateRequest_Text{Text: "hi"}},
			want: msgs(2, tokens(0, hi, 20), 1, true, false, length(20)),
		},
		"multibyte text is one token per byte": {
			req:  &vllmpb.GenerateRequest{Prompt: &vllmpb.GenerateRequest_Text{Text: "é"}, Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 2}},
			want: msgs(2, tokens(0, []uint32{0xc3, 0xa9}, 2), 1, true, false, length(2)),
		},
		"three tokens per message": {
			perMsg: 3,
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{5}}},
				Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 7},
			},
			want: msgs(1, tokens(0, []uint32{5}, 7), 3, true, false, length(7)),
		},
		"ids only": {
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{5}}},
				Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 2},
				Response: &vllmpb.ResponseOptions{OutputText: proto.Bool(false), OutputTokenIds: true},
			},
			want: msgs(1, tokens(0, []uint32{5}, 2), 1, false, true, length(2)),
		},
		"stop token": {
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{5}}},
				Stopping: &vllmpb.StoppingCriteria{StopTokenIds: []uint32{1, stopAt[4]}},
				Response: &vllmpb.ResponseOptions{OutputTokenIds: true},
			},
			want: func() []*vllmpb.GenerateResponse {
				m := msgs(1, stopAt[:5], 1, true, true, &vllmpb.FinishInfo{
					NumOutputTokens: 5,
					FinishReason:    vllmpb.FinishInfo_STOP,
					StopReason:      &vllmpb.FinishInfo_StopTokenId{StopTokenId: stopAt[4]},
				})
				m[4].Outputs.Text = "" // vLLM drops a stop token's text
				return m
			}(),
		},
		"stop token with its text": {
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{5}}},
				Stopping: &vllmpb.StoppingCriteria{StopTokenIds: []uint32{stopAt[1]}, IncludeStopStrings: true},
			},
			want: msgs(1, stopAt[:2], 1, true, false, &vllmpb.FinishInfo{
				NumOutputTokens: 2,
				FinishReason:    vllmpb.FinishInfo_STOP,
				StopReason:      &vllmpb.FinishInfo_StopTokenId{StopTokenId: stopAt[1]},
			}),
		},
		"min_new_tokens defers a stop token": {
			req: &vllmpb.GenerateRequest{
				Prompt:   &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: []uint32{5}}},
				Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 4, MinNewTokens: 3, StopTokenIds: []uint32{stopAt[1]}},
			},
			want: msgs(1, stopAt[:4], 1, true, false, length(4)),
		},
		"empty prompt": {
			req:  &vllmpb.GenerateRequest{Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 1}},
			want: msgs(0, tokens(0, nil, 1), 1, true, false, length(1)),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, Config{TokensPerMessage: tt.perMsg})
			for run := range 2 { // deterministic: the same answer twice
				got, err := h.stream(t, tt.req)
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
					t.Errorf("run %d: stream (-want +got):\n%s", run, diff)
				}
			}

			// Unary Generate collects the same.
			want := &vllmpb.GenerateResponse{PromptInfo: tt.want[0].PromptInfo, Outputs: &vllmpb.SequenceOutput{}}
			for _, m := range tt.want {
				want.Outputs.Text += m.Outputs.Text
				want.Outputs.NumTokens += m.Outputs.NumTokens
				want.Outputs.TokenIds = append(want.Outputs.TokenIds, m.Outputs.TokenIds...)
				want.Outputs.FinishInfo = m.Outputs.FinishInfo
			}
			got, err := h.inf.Generate(h.ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Generate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateRejects(t *testing.T) {
	t.Parallel()
	h := start(t, Config{})
	_, err := h.stream(t, &vllmpb.GenerateRequest{RequestId: "n2", Sampling: &vllmpb.RandomSampling{NumSequences: 2}})
	wantCode(t, "GenerateStream n=2", err, codes.InvalidArgument)
	_, err = h.inf.Generate(h.ctx, &vllmpb.GenerateRequest{RequestId: "n2", Sampling: &vllmpb.RandomSampling{NumSequences: 2}})
	wantCode(t, "Generate n=2", err, codes.InvalidArgument)
	if got := h.state(t).Requests["n2"]; got != 2 {
		t.Errorf("/state requests[n2] = %d, want 2 (rejected requests count)", got)
	}
}

// TestGenerateRefusesAsVLLM: a model vLLM does not serve and a prompt over
// max_model_len get vLLM's codes and words; a text prompt counts a token
// per byte; output stops at max_model_len.
func TestGenerateRefusesAsVLLM(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Model: "m", MaxModelLen: 8})
	for _, tc := range []struct {
		name string
		req  *vllmpb.GenerateRequest
		code codes.Code
		msg  string
	}{
		{"unknown model", &vllmpb.GenerateRequest{RequestId: "a", Model: "x", Prompt: &vllmpb.GenerateRequest_Text{Text: "hi"}},
			codes.NotFound, "The model `x` does not exist."},
		{"long text", &vllmpb.GenerateRequest{RequestId: "b", Prompt: &vllmpb.GenerateRequest_Text{Text: "123456789"}},
			codes.InvalidArgument, "The decoder prompt (length 9) is longer than the maximum model length of 8."},
		{"long ids", &vllmpb.GenerateRequest{RequestId: "c", Prompt: &vllmpb.GenerateRequest_TokenIds{TokenIds: &vllmpb.TokenIds{Ids: make([]uint32, 9)}}},
			codes.InvalidArgument, "The decoder prompt (length 9)"},
		{"n=2", &vllmpb.GenerateRequest{RequestId: "e", Sampling: &vllmpb.RandomSampling{NumSequences: 2}},
			codes.InvalidArgument, "num_sequences > 1 is not supported"},
		{"schema not JSON", &vllmpb.GenerateRequest{RequestId: "f", Decoding: &vllmpb.DecodingParameters{
			StructuredOutput: &vllmpb.DecodingParameters_Json{Json: "{type: object"}}},
			codes.InvalidArgument, "invalid json schema: "},
		{"blank grammar", &vllmpb.GenerateRequest{RequestId: "g", Decoding: &vllmpb.DecodingParameters{
			StructuredOutput: &vllmpb.DecodingParameters_Grammar{Grammar: " \n"}}},
			codes.InvalidArgument, "grammar must not be blank"},
	} {
		_, err := h.stream(t, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v, want %s with %q", tc.name, err, tc.code, tc.msg)
		}
	}
	msgs, err := h.stream(t, &vllmpb.GenerateRequest{RequestId: "d", Model: "m", Prompt: &vllmpb.GenerateRequest_Text{Text: "123456"},
		Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if f := msgs[len(msgs)-1].GetOutputs().GetFinishInfo(); f.GetNumOutputTokens() != 2 || f.GetFinishReason() != vllmpb.FinishInfo_LENGTH {
		t.Errorf("6 prompt tokens, 100 asked, max_model_len 8: finish %v, want 2 tokens, LENGTH", f)
	}
}

// TestRecordsRequest: GET /state's last_request is the last request as
// protojson, refused ones included, so a test reads back every field set;
// num_cached_tokens is reported only when configured, as vLLM 0.6 does.
func TestRecordsRequest(t *testing.T) {
	t.Parallel()
	h := start(t, Config{CachedTokens: 5})
	req := &vllmpb.GenerateRequest{RequestId: "r", Prompt: &vllmpb.GenerateRequest_Text{Text: "hi"},
		Decoding: &vllmpb.DecodingParameters{PresencePenalty: 0.5, LogitBias: map[uint32]float32{7: -100},
			StructuredOutput: &vllmpb.DecodingParameters_Choice{Choice: &vllmpb.DecodingParameters_StringChoices{Choices: []string{"a", "b"}}}},
		Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 1}}
	msgs, err := h.stream(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := msgs[len(msgs)-1].GetOutputs().GetFinishInfo().NumCachedTokens; got == nil || *got != 2 {
		t.Errorf("num_cached_tokens = %v, want 2 (5 configured, capped at the 2-token prompt)", got)
	}
	got := &vllmpb.GenerateRequest{}
	if err := protojson.Unmarshal(h.state(t).LastRequest, got); err != nil {
		t.Fatalf("last_request %s: %v", h.state(t).LastRequest, err)
	}
	if diff := cmp.Diff(req, got, protocmp.Transform()); diff != "" {
		t.Errorf("last_request (-sent +recorded):\n%s", diff)
	}
	_, err = h.stream(t, &vllmpb.GenerateRequest{RequestId: "n", Sampling: &vllmpb.RandomSampling{NumSequences: 3}})
	wantCode(t, "n=3", err, codes.InvalidArgument)
	if err := protojson.Unmarshal(h.state(t).LastRequest, got); err != nil || got.GetSampling().GetNumSequences() != 3 {
		t.Errorf("last_request after a refused request = %v (%v), want num_sequences 3", got, err)
	}
}

// held starts a stream that /hold stops after n one-token messages, and reads them.
func held(t *testing.T, h *harness, id string, n int) vllmpb.Inference_GenerateStreamClient {
	t.Helper()
	s, err := h.inf.GenerateStream(h.ctx, &vllmpb.GenerateRequest{RequestId: id, Stopping: &vllmpb.StoppingCriteria{MaxNewTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Recv(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	return s
}

func wantFinish(t *testing.T, s vllmpb.Inference_GenerateStreamClient, want *vllmpb.FinishInfo) {
	t.Helper()
	m, err := s.Recv()
	if err != nil {
		t.Fatalf("final message: %v", err)
	}
	if diff := cmp.Diff(want, m.GetOutputs().GetFinishInfo(), protocmp.Transform()); diff != "" {
		t.Errorf("finish_info (-want +got):\n%s", diff)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the final message: %v, want io.EOF", err)
	}
}

func TestAbort(t *testing.T) {
	t.Parallel()
	h := start(t, Config{})
	h.mustPost(t, "/hold", `{"at_token": 2}`)
	s := held(t, h, "r1", 2)
	if got := h.state(t).InFlight; got != 1 {
		t.Errorf("/state in_flight = %d, want 1", got)
	}

	rpc(t)(h.ctl.Abort(h.ctx, &vllmpb.AbortRequest{RequestIds: []string{"r1", "gone"}}))
	wantFinish(t, s, &vllmpb.FinishInfo{NumOutputTokens: 2, FinishReason: vllmpb.FinishInfo_ABORTED})

	st := h.state(t)
	if diff := cmp.Diff(map[string]int{"r1": 1, "gone": 1}, st.Aborts); diff != "" {
		t.Errorf("/state aborts (-want +got):\n%s", diff)
	}
	if st.InFlight != 0 {
		t.Errorf("/state in_flight = %d, want 0", st.InFlight)
	}
}

func TestPauseAbortMode(t *testing.T) {
	t.Parallel()
	h := start(t, Config{})
	h.mustPost(t, "/hold", `{"at_token": 1}`)
	s := held(t, h, "r", 1)
	rpc(t)(h.ctl.PauseGeneration(h.ctx, &vllmpb.PauseGenerationRequest{Mode: vllmpb.PauseMode_PAUSE_MODE_ABORT}))
	wantFinish(t, s, &vllmpb.FinishInfo{NumOutputTokens: 1, FinishReason: vllmpb.FinishInfo_ABORTED})
}

func TestControlInfo(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Model: "m", InstanceID: "abc", ReasoningParser: "qwen3", ToolCallParser: "hermes"})
	info, err := h.ctl.GetServerInfo(h.ctx, &vllmpb.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &vllmpb.ServerInfo{
		EngineVersion:      "0.33.0-mock",
		ApiVersion:         "v1",
		InstanceId:         "abc",
		Parallelism:        &vllmpb.ParallelismInfo{TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1},
		MaxModelLen:        4096,
		KvBlockSize:        16,
		TotalKvBlocks:      1024,
		MaxRunningRequests: 256,
		MaxBatchedTokens:   8192,
		RlCapabilities:     &vllmpb.RlCapabilities{SleepModeEnabled: true},
	}
	if diff := cmp.Diff(want, info, protocmp.Transform()); diff != "" {
		t.Errorf("GetServerInfo (-want +got):\n%s", diff)
	}
	model, err := h.ctl.GetModelInfo(h.ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantModel := &vllmpb.ModelInfo{
		ModelId: "m", ServedModelName: "m", SupportsTextInput: true, SupportsTokenIdsInput: true,
		ReasoningParser: "qwen3", ToolCallParser: "hermes",
	}
	if diff := cmp.Diff(wantModel, model, protocmp.Transform()); diff != "" {
		t.Errorf("GetModelInfo (-want +got):\n%s", diff)
	}
}

func TestStateCounters(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Model: "m", InstanceID: "i"})
	one := &vllmpb.StoppingCriteria{MaxNewTokens: 1}
	for _, id := range []string{"a", "b", "a"} {
		rpc(t)(h.inf.Generate(h.ctx, &vllmpb.GenerateRequest{RequestId: id, Stopping: one}))
	}
	if _, err := h.stream(t, &vllmpb.GenerateRequest{RequestId: "b", Stopping: one}); err != nil {
		t.Fatal(err)
	}
	rpc(t)(h.ctl.Abort(h.ctx, &vllmpb.AbortRequest{RequestIds: []string{"a", "c"}}))
	rpc(t)(h.ctl.Abort(h.ctx, &vllmpb.AbortRequest{RequestIds: []string{"a"}}))
	rpc(t)(h.ctl.Sleep(h.ctx, &vllmpb.SleepRequest{}))

	want := State{
		Model:         "m",
		InstanceID:    "i",
		Health:        map[string]string{"": "SERVING", "vllm.Control": "SERVING", "vllm.Inference": "NOT_SERVING"},
		Sleeping:      true,
		Requests:      map[string]int{"a": 2, "b": 2},
		Aborts:        map[string]int{"a": 2, "c": 1},
		RequestsTotal: 4,
		AbortsTotal:   3,
		LastRequest:   json.RawMessage(`{"requestId":"b","stopping":{"maxNewTokens":1}}`),
	}
	if diff := cmp.Diff(want, h.state(t), cmpopts.IgnoreFields(State{}, "LastHealthChangeUnixNano")); diff != "" {
		t.Errorf("/state (-want +got):\n%s", diff)
	}

}

// TestWatchMode: Config.WatchMode reaches vLLM's health service, and an
// unknown one makes Serve fail.
func TestWatchMode(t *testing.T) {
	t.Parallel()
	h := start(t, Config{WatchMode: WatchOnce})
	w := h.watch(t, serviceInference)
	if got := next(t, w); got != serving {
		t.Fatalf("first = %v, want SERVING", got)
	}
	if _, err := w.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("second Recv = %v, want io.EOF: WatchOnce ends the stream", err)
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := New(Config{WatchMode: "loud"}).Serve(lis); err == nil {
		t.Error("Serve with WatchMode loud = nil, want an error")
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	h := start(t, Config{})
	ctx, cancel := context.WithCancel(h.ctx)
	w, err := h.health.Watch(ctx, &healthpb.HealthCheckRequest{Service: serviceServer})
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got != serving {
		t.Fatalf("first = %v, want SERVING", got)
	}
	code, body := h.post(t, "/stop", "")
	if code != http.StatusOK {
		t.Fatalf("POST /stop = %d %v, want 200", code, body)
	}
	want := map[string]any{"": "NOT_SERVING", "vllm.Control": "NOT_SERVING", "vllm.Inference": "NOT_SERVING"}
	if diff := cmp.Diff(want, body["health"]); diff != "" {
		t.Errorf("POST /stop health (-want +got):\n%s", diff)
	}
	if got := next(t, w); got != notServing {
		t.Errorf("Watch after /stop = %v, want NOT_SERVING", got)
	}
	cancel() // a Watch never ends by itself; graceful stop waits for it
	if err := <-h.served; err != nil {
		t.Errorf("Serve() after /stop = %v, want nil", err)
	}
	h.served <- nil // for the cleanup, which stops again: Stop is idempotent
	if code, _ := h.post(t, "/health", `{"status": "SERVING"}`); code != http.StatusConflict {
		t.Errorf("POST /health after /stop = %d, want 409", code)
	}
}
