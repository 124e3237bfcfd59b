package router

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// tokWorker is an in-process worker that tokenizes a text as its bytes
// and a chat as its messages' contents' bytes; it records the last
// Tokenize request. refuse, when not OK, fails every call with it.
type tokWorker struct {
	workerv1.UnimplementedWorkerServer
	ep discovery.Registration

	mu     sync.Mutex
	refuse codes.Code
	last   *workerv1.TokenizeRequest
	n      int
}

func (w *tokWorker) Tokenize(_ context.Context, req *workerv1.TokenizeRequest) (*workerv1.TokenizeResponse, error) {
	w.mu.Lock()
	w.last, w.n = req, w.n+1
	refuse := w.refuse
	w.mu.Unlock()
	if refuse != codes.OK {
		return nil, status.Error(refuse, "refused")
	}
	text := req.GetText()
	for _, m := range req.GetMessages().GetMessages() {
		text += m.GetContent()
	}
	resp := &workerv1.TokenizeResponse{MaxModelLen: 100}
	for i := range len(text) {
		resp.TokenIds = append(resp.TokenIds, uint32(text[i]))
		resp.TokenStrs = append(resp.TokenStrs, text[i:i+1])
	}
	return resp, nil
}

func (w *tokWorker) Detokenize(_ context.Context, req *workerv1.DetokenizeRequest) (*workerv1.DetokenizeResponse, error) {
	var b strings.Builder
	for _, id := range req.GetTokenIds() {
		if id > 255 {
			return nil, status.Error(codes.InvalidArgument, "token_ids: id out of the vocabulary")
		}
		b.WriteByte(byte(id))
	}
	return &workerv1.DetokenizeResponse{Text: b.String()}, nil
}

// startTokWorker serves a tokWorker of model publishing caps (a chat
// template too) until the test ends.
func startTokWorker(t *testing.T, id, model, caps string) *tokWorker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &tokWorker{ep: discovery.Registration{WorkerID: id, Address: "127.0.0.1", Port: lis.Addr().(*net.TCPAddr).Port,
		Model: model, Engine: "fake", InstanceID: id + "-1", Chat: true, Caps: discovery.ParseCapabilities(caps)}}
	s := grpc.NewServer()
	workerv1.RegisterWorkerServer(s, w)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return w
}

func tokRouter(t *testing.T, ws ...*tokWorker) *testRouter {
	t.Helper()
	var eps []discovery.Registration
	for _, w := range ws {
		eps = append(eps, w.ep)
	}
	return startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps)
}

// POST /tokenize answers in vLLM's shape, a prompt or messages (their
// options passed on), from a worker that lists tokenize only; POST
// /detokenize gives the text back.
func TestTokenizeHTTP(t *testing.T) {
	t.Parallel()
	plain := startTokWorker(t, "plain", "m", "seed")
	tok := startTokWorker(t, "tok", "m", "chat_template_kwargs,tokenize")
	r := tokRouter(t, plain, tok)
	for range 2 { // round-robin would give plain one of them
		code, _, body := r.do(t, http.MethodPost, "/tokenize", `{"model":"m","prompt":"hi"}`)
		if want := `{"count":2,"max_model_len":100,"tokens":[104,105],"token_strs":null}` + "\n"; code != http.StatusOK || body != want {
			t.Fatalf("tokenize: %d %s, want 200 %s", code, body, want)
		}
	}
	plain.mu.Lock()
	if plain.n != 0 {
		t.Errorf("the worker without tokenize got %d requests", plain.n)
	}
	plain.mu.Unlock()
	code, _, body := r.do(t, http.MethodPost, "/tokenize", `{"model":"m","messages":[{"role":"developer","content":"a","name":"x"}],`+
		`"add_generation_prompt":false,"add_special_tokens":true,"return_token_strs":true,"chat_template_kwargs":{"k":1}}`)
	if want := `{"count":1,"max_model_len":100,"tokens":[97],"token_strs":["a"]}` + "\n"; code != http.StatusOK || body != want {
		t.Fatalf("tokenize messages: %d %s, want 200 %s", code, body, want)
	}
	wantReq := &workerv1.TokenizeRequest{Model: "m", AddSpecialTokens: proto.Bool(true), AddGenerationPrompt: proto.Bool(false), ReturnTokenStrs: true,
		Input: &workerv1.TokenizeRequest_Messages{Messages: &workerv1.Messages{ChatTemplateKwargs: `{"k":1}`,
			Messages: []*workerv1.Message{{Role: "developer", Content: "a", Name: "x"}}}}}
	tok.mu.Lock()
	got := tok.last
	tok.mu.Unlock()
	if !proto.Equal(wantReq, got) {
		t.Errorf("worker request %v, want %v", got, wantReq)
	}
	code, _, body = r.do(t, http.MethodPost, "/detokenize", `{"model":"m","tokens":[104,105]}`)
	if code != http.StatusOK || body != `{"prompt":"hi"}`+"\n" {
		t.Errorf("detokenize: %d %s, want 200 {\"prompt\":\"hi\"}", code, body)
	}
}

// Bad requests get 400 in OpenAI's shape naming the field; a model whose
// workers have no tokenizer gets 400 naming the model and the flag.
func TestTokenizeHTTPErrors(t *testing.T) {
	t.Parallel()
	r := tokRouter(t, startTokWorker(t, "tok", "m", "tokenize"), startTokWorker(t, "plain", "p", "seed"))
	for _, c := range []struct{ path, body, param, says string }{
		{"/tokenize", `{"model":"p","prompt":"hi"}`, "model", "--tokenizer-dir"},
		{"/detokenize", `{"model":"p","tokens":[1]}`, "model", "capability tokenize"},
		{"/tokenize", `{"model":"m"}`, "prompt", "required"},
		{"/tokenize", `{"model":"m","prompt":"a","messages":[{"role":"user","content":"b"}]}`, "messages", "not both"},
		{"/tokenize", `{"model":"m","prompt":1}`, "prompt", "want a string"},
		{"/tokenize", `{"model":"m","prompt":"a","add_generation_prompt":true}`, "add_generation_prompt", "only with messages"},
		{"/tokenize", `{"model":"m","messages":[{"role":"user","content":"b"}],"continue_final_message":true}`, "continue_final_message", "cannot honour"},
		{"/tokenize", `{"model":"m","messages":[{"role":"user","content":"b"}],"tools":[{"type":"function"}]}`, "tools", "cannot honour"},
		{"/tokenize", `{"model":"m","messages":[{"role":"user","content":"b"}],"chat_template":"x"}`, "chat_template", "cannot honour"},
		{"/tokenize", `{"model":"m","prompt":"a","tokens":[1]}`, "tokens", "Unrecognized"},
		{"/detokenize", `{"model":"m","prompt":"a"}`, "prompt", "Unrecognized"},
		{"/detokenize", `{"model":"m"}`, "tokens", "required"},
		{"/detokenize", `{"model":"m","tokens":[-1]}`, "tokens", "tokens[0]"},
		{"/detokenize", `{"model":"m","tokens":[300]}`, "tokens", "tokens: id out of the vocabulary"},
	} {
		code, _, body := r.do(t, http.MethodPost, c.path, c.body)
		m := decode(t, body)
		e, _ := m["error"].(map[string]any)
		if code != http.StatusBadRequest || e["param"] != c.param || !strings.Contains(e["message"].(string), c.says) || e["type"] != "invalid_request_error" {
			t.Errorf("%s %s: %d %s, want 400 naming %s and saying %q", c.path, c.body, code, body, c.param, c.says)
		}
	}
	if code, _, body := r.do(t, http.MethodPost, "/tokenize", `{"model":"nope","prompt":"a"}`); code != http.StatusNotFound {
		t.Errorf("unknown model: %d %s, want 404", code, body)
	}
	if code, _, _ := r.do(t, http.MethodGet, "/tokenize", ``); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /tokenize: %d, want 405", code)
	}
}

// The router's gRPC API relays Tokenize and Detokenize, and tries
// another worker when one is unavailable; without a worker that lists
// tokenize, it answers FAILED_PRECONDITION naming the model.
func TestTokenizeGRPC(t *testing.T) {
	t.Parallel()
	down := startTokWorker(t, "down", "m", "tokenize")
	down.mu.Lock()
	down.refuse = codes.Unavailable
	down.mu.Unlock()
	up := startTokWorker(t, "up", "m", "tokenize")
	r := tokRouter(t, down, up, startTokWorker(t, "plain", "p", "seed"))
	for range 2 {
		resp, err := r.client.Tokenize(t.Context(), &workerv1.TokenizeRequest{Model: "m", Input: &workerv1.TokenizeRequest_Text{Text: "ok"}})
		if err != nil || !cmp.Equal(resp.GetTokenIds(), []uint32{'o', 'k'}) {
			t.Fatalf("tokenize: %v, %v; want [111 107]", resp, err)
		}
	}
	d, err := r.client.Detokenize(t.Context(), &workerv1.DetokenizeRequest{Model: "m", TokenIds: []uint32{'o', 'k'}})
	if err != nil || d.GetText() != "ok" {
		t.Errorf("detokenize: %v, %v; want ok", d, err)
	}
	_, err = r.client.Tokenize(t.Context(), &workerv1.TokenizeRequest{Model: "p", Input: &workerv1.TokenizeRequest_Text{Text: "x"}})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), `model "p"`) {
		t.Errorf("model without a tokenizer: %v, want FAILED_PRECONDITION naming it", err)
	}
}
