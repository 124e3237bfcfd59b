package router

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// embWorker is an in-process worker of an embedding model: a text's
// vector is [its length, 0.5], token ids' [their count, -0.5], prompt
// tokens their length. It records every request; refuse, when set, fails
// each call with it; gate, when set, holds each call until it closes,
// and peak counts the most calls at once.
type embWorker struct {
	workerv1.UnimplementedWorkerServer
	ep discovery.Registration

	mu         sync.Mutex
	reqs       []*workerv1.EmbedRequest
	refuse     error
	inflight   int
	peak       int
	gate       chan struct{}
	gateAt     int
	gateClosed bool
}

func (w *embWorker) Embed(ctx context.Context, req *workerv1.EmbedRequest) (*workerv1.EmbedResponse, error) {
	w.mu.Lock()
	w.reqs = append(w.reqs, req)
	w.inflight++
	w.peak = max(w.peak, w.inflight)
	if w.gate != nil && w.inflight >= w.gateAt && !w.gateClosed {
		w.gateClosed = true
		close(w.gate)
	}
	gate, refuse := w.gate, w.refuse
	w.mu.Unlock()
	defer func() { w.mu.Lock(); w.inflight--; w.mu.Unlock() }()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if refuse != nil {
		return nil, refuse
	}
	if ids := req.GetTokenIds(); ids != nil {
		return &workerv1.EmbedResponse{Embedding: []float32{float32(len(ids.GetIds())), -0.5}, PromptTokens: uint32(len(ids.GetIds()))}, nil
	}
	return &workerv1.EmbedResponse{Embedding: []float32{float32(len(req.GetText())), 0.5}, PromptTokens: uint32(len(req.GetText()))}, nil
}

// startEmbWorker serves an embWorker of model publishing caps until the
// test ends.
func startEmbWorker(t *testing.T, id, model, caps string) *embWorker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &embWorker{ep: discovery.Registration{WorkerID: id, Address: "127.0.0.1", Port: lis.Addr().(*net.TCPAddr).Port,
		Model: model, Engine: "fake", InstanceID: id + "-1", TokensOnly: true, Chat: true, Caps: discovery.ParseCapabilities(caps)}}
	s := grpc.NewServer()
	workerv1.RegisterWorkerServer(s, w)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return w
}

func embRouter(t *testing.T, ws ...*embWorker) *testRouter {
	t.Helper()
	var eps []discovery.Registration
	for _, w := range ws {
		eps = append(eps, w.ep)
	}
	return startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps)
}

// embeddingsBody is the response of POST /v1/embeddings, its vectors
// left as JSON to read either encoding.
type embeddingsBody struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string          `json:"model"`
	Usage embeddingsUsage `json:"usage"`
}

func decodeBase64Floats(t *testing.T, raw json.RawMessage) []float32 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("embedding %s: want a base64 string: %v", raw, err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("embedding %q: not base64 of float32s: %v", s, err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// POST /v1/embeddings answers in OpenAI's shape, float or base64 (little-
// endian float32s), a string or each of a list in input order, token ids
// too; only the worker of the embedding model is sent anything.
func TestEmbeddingsHTTP(t *testing.T) {
	t.Parallel()
	gen := startEmbWorker(t, "gen", "m", "seed")
	emb := startEmbWorker(t, "emb", "e5", "embed")
	r := embRouter(t, gen, emb)
	code, _, body := r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":"hello","user":"u1"}`)
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[5,0.5]}],"model":"e5","usage":{"prompt_tokens":5,"total_tokens":5}}` + "\n"
	if code != http.StatusOK || body != want {
		t.Fatalf("embeddings: %d %s, want 200 %s", code, body, want)
	}
	code, _, body = r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":["a","bcd",[1,2]],"encoding_format":"base64"}`)
	var got embeddingsBody
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || len(got.Data) != 3 {
		t.Fatalf("base64 list: %d %s (%v)", code, body, err)
	}
	for i, wantV := range [][]float32{{1, 0.5}, {3, 0.5}, {2, -0.5}} {
		if d := got.Data[i]; d.Index != i || d.Object != "embedding" || !cmp.Equal(decodeBase64Floats(t, d.Embedding), wantV) {
			t.Errorf("data[%d] = %+v, want index %d and %v", i, d, i, wantV)
		}
	}
	if got.Usage != (embeddingsUsage{PromptTokens: 6, TotalTokens: 6}) {
		t.Errorf("usage %+v, want 6 tokens", got.Usage)
	}
	code, _, body = r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":[7,8,9],"encoding_format":"float"}`)
	if code != http.StatusOK || !strings.Contains(body, `"embedding":[3,-0.5]`) {
		t.Errorf("token ids: %d %s, want one embedding [3,-0.5]", code, body)
	}
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if len(gen.reqs) != 0 {
		t.Errorf("the generation model's worker got %d embedding requests", len(gen.reqs))
	}
}

// A list of inputs runs one Embed each, at most batchParallel at once and
// more than one, the data still in input order.
func TestEmbeddingsConcurrency(t *testing.T) {
	t.Parallel()
	emb := startEmbWorker(t, "emb", "e5", "embed")
	emb.gate, emb.gateAt = make(chan struct{}), batchParallel
	r := embRouter(t, emb)
	inputs := make([]string, 40)
	for i := range inputs {
		inputs[i] = strings.Repeat("x", i+1)
	}
	b, _ := json.Marshal(map[string]any{"model": "e5", "input": inputs})
	code, _, body := r.do(t, http.MethodPost, "/v1/embeddings", string(b))
	var got embeddingsBody
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || len(got.Data) != len(inputs) {
		t.Fatalf("40 inputs: %d %s", code, body)
	}
	for i, d := range got.Data {
		var v []float32
		if err := json.Unmarshal(d.Embedding, &v); err != nil || d.Index != i || v[0] != float32(i+1) {
			t.Errorf("data[%d] = index %d, %s; want index %d, [%d,0.5]", i, d.Index, d.Embedding, i, i+1)
		}
	}
	emb.mu.Lock()
	defer emb.mu.Unlock()
	if emb.peak != batchParallel {
		t.Errorf("at most %d Embed calls at once, want %d", emb.peak, batchParallel)
	}
}

// The fault: POST /v1/embeddings was 404. Bad requests get 400
// naming the field; a model that serves no embeddings gets 400 naming
// the model; chat and completions for an embedding model get 400 naming
// it rather than an engine's error.
func TestEmbeddingsHTTPErrors(t *testing.T) {
	t.Parallel()
	r := embRouter(t, startEmbWorker(t, "gen", "m", "seed"), startEmbWorker(t, "emb", "e5", "embed"))
	many := `"` + strings.Repeat(`a","`, MaxEmbeddingInputs) + `a"`
	for _, c := range []struct{ path, body, param, says string }{
		{"/v1/embeddings", `{"model":"m","input":"hi"}`, "model", `model "m" does not serve embeddings`},
		{"/v1/embeddings", `{"model":"e5"}`, "input", "input: required"},
		{"/v1/embeddings", `{"model":"e5","input":""}`, "input", "input: must not be empty"},
		{"/v1/embeddings", `{"model":"e5","input":[]}`, "input", "empty array"},
		{"/v1/embeddings", `{"model":"e5","input":["a",""]}`, "input", "input[1]: must not be empty"},
		{"/v1/embeddings", `{"model":"e5","input":["a",[-1]]}`, "input", "input[1]: want a string or an array of token ids"},
		{"/v1/embeddings", `{"model":"e5","input":{"a":1}}`, "input", "want a string"},
		{"/v1/embeddings", `{"model":"e5","input":[` + many + `]}`, "input", "more than the 2048"},
		{"/v1/embeddings", `{"model":"e5","input":"a","encoding_format":"int8"}`, "encoding_format", `want "float" or "base64"`},
		{"/v1/embeddings", `{"model":"e5","input":"a","dimensions":256}`, "dimensions", "cannot truncate"},
		{"/v1/embeddings", `{"model":"e5","input":"a","truncate":true}`, "truncate", "Unrecognized request argument"},
		{"/v1/chat/completions", `{"model":"e5","messages":[{"role":"user","content":"hi"}]}`, "model", `model "e5" is an embedding model`},
		{"/v1/completions", `{"model":"e5","prompt":"hi"}`, "model", "it does not generate (Chat Completions, Completions, Responses)"},
	} {
		code, _, body := r.do(t, http.MethodPost, c.path, c.body)
		var e errorBody
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%s %.80s: %d %s, want 400 naming %s and saying %q", c.path, c.body, code, body, c.param, c.says)
		}
	}
	if code, _, body := r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"nope","input":"a"}`); code != http.StatusNotFound {
		t.Errorf("unknown model: %d %s, want 404", code, body)
	}
	if code, _, _ := r.do(t, http.MethodGet, "/v1/embeddings", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/embeddings: %d, want 405", code)
	}
}

// A worker's refusals become OpenAI errors: an input over the model's
// length names input (and its index in a list) with the numbers; a
// failure's transport text never reaches the client.
func TestEmbeddingsWorkerErrors(t *testing.T) {
	t.Parallel()
	emb := startEmbWorker(t, "emb", "e5", "embed")
	r := embRouter(t, emb)
	emb.refuse = workerapi.ContextLengthError("input.text", 8, 9, 0)
	code, _, body := r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":["a","b"]}`)
	var e errorBody
	_ = json.Unmarshal([]byte(body), &e)
	if code != http.StatusBadRequest || e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" ||
		!strings.Contains(e.Error.Message, "maximum context length is 8 tokens") || !strings.Contains(e.Error.Message, "has 9 tokens") {
		t.Errorf("too long: %d %s, want 400 context_length_exceeded with the numbers", code, body)
	}
	emb.mu.Lock()
	emb.refuse = status.Error(codes.InvalidArgument, "input.text: tokenizing: bad")
	emb.mu.Unlock()
	code, _, body = r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":"a"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `"param":"input"`) || !strings.Contains(body, "input: tokenizing: bad") {
		t.Errorf("refused input: %d %s, want 400 naming input", code, body)
	}
	emb.mu.Lock()
	emb.refuse = status.Error(codes.Internal, "transport: connection reset by peer")
	emb.mu.Unlock()
	code, _, body = r.do(t, http.MethodPost, "/v1/embeddings", `{"model":"e5","input":"a"}`)
	if code < 500 || strings.Contains(body, "transport") {
		t.Errorf("failure: %d %s, want a 5xx without the transport text", code, body)
	}
}

// The router relays the worker API's Embed on its gRPC side, to workers
// of an embedding model only.
func TestEmbedGRPC(t *testing.T) {
	t.Parallel()
	gen := startEmbWorker(t, "gen", "m", "seed")
	emb := startEmbWorker(t, "emb", "e5", "embed")
	r := embRouter(t, gen, emb)
	resp, err := r.client.Embed(t.Context(), &workerv1.EmbedRequest{Model: "e5", Input: &workerv1.EmbedRequest_Text{Text: "abc"}})
	if err != nil || !cmp.Equal(resp.GetEmbedding(), []float32{3, 0.5}) || resp.GetPromptTokens() != 3 {
		t.Fatalf("Embed = %v, %v; want [3 0.5], 3 tokens", resp, err)
	}
	_, err = r.client.Embed(t.Context(), &workerv1.EmbedRequest{Model: "m", Input: &workerv1.EmbedRequest_Text{Text: "abc"}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), `model: model "m" does not serve embeddings`) {
		t.Errorf("Embed of a generation model = %v, want INVALID_ARGUMENT naming the model", err)
	}
}
