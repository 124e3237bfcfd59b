package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeWorker is an in-process vigil worker on loopback. By default it
// answers every request with the chunks "hello" and " world" and a final
// STOP; its knobs change that.
type fakeWorker struct {
	ep       discovery.Registration
	requests atomic.Int64
	// streams counts Generate calls as they arrive, before their request
	// message is read: those that gRPC refused too.
	streams atomic.Int64

	mu sync.Mutex
	// refuse, when not OK, fails requests with this code before any
	// message.
	refuse codes.Code
	// fail, when not nil, fails requests with this error before any
	// message.
	fail error
	// ttft, when not 0, delays the first chunk: an engine's time to
	// first token.
	ttft time.Duration
	// empty answers with a final STOP and no token, as a broken engine
	// that returns at once.
	empty bool
	// breakAfterChunk sends one chunk, then a final ERROR and UNAVAILABLE,
	// as a worker whose engine was lost mid-generation.
	breakAfterChunk bool
	// hold makes requests wait for the client to go away; the first one
	// closes holding when it starts waiting, and cancelled when it is done.
	hold      bool
	holdOnce  sync.Once
	holding   chan struct{}
	cancelled chan struct{}
	last      *workerv1.GenerateRequest
	// wait, when not nil, holds requests until it is closed (or the client
	// goes away), then answers them as the other knobs say: an engine in a
	// long queue or prefill. The first one closes holding when it waits.
	wait chan struct{}
	// tagPrompt puts a text prompt in brackets before the first chunk's
	// text, so that a client tells the prompts of a batch apart.
	tagPrompt bool
	// cached is the usage's cached_tokens.
	cached uint32
	// length ends requests with LENGTH, as at max_tokens.
	length bool
	// script, when not nil, is each choice's chunks (their index set to
	// the choice's, the choices' chunks interleaved), then a final with
	// finish (STOP when unset) and reasoning tokens: a worker whose
	// parsers split reasoning and tool calls out (issue 27).
	script    []*workerv1.Chunk
	finish    workerv1.FinishReason
	reasoning uint32

	workerv1.UnimplementedWorkerServer
}

func (w *fakeWorker) set(f func(w *fakeWorker)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *fakeWorker) lastRequest() *workerv1.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *fakeWorker) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	w.requests.Add(1)
	w.mu.Lock()
	w.last = proto.Clone(req).(*workerv1.GenerateRequest)
	refuse, broken, hold, fail, wait, empty, ttft := w.refuse, w.breakAfterChunk, w.hold, w.fail, w.wait, w.empty, w.ttft
	tag, cached, length, script := w.tagPrompt, w.cached, w.length, w.script
	finish, reasoning := w.finish, w.reasoning
	w.mu.Unlock()

	// As the worker endpoint: a request meant for another worker id is
	// refused.
	if err := workerapi.CheckWorkerID(stream.Context(), w.ep.WorkerID); err != nil {
		return err
	}
	if wait != nil {
		w.holdOnce.Do(func() { close(w.holding) })
		select {
		case <-wait:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
	if fail != nil {
		return fail
	}
	if refuse != codes.OK {
		return status.Errorf(refuse, "worker %s refuses", w.ep.WorkerID)
	}
	if req.GetModel() != "" && req.GetModel() != w.ep.Model {
		return status.Errorf(codes.NotFound, "model %q is not served here", req.GetModel())
	}
	if hold {
		first := false
		w.holdOnce.Do(func() { first = true })
		if first {
			close(w.holding)
			defer close(w.cancelled)
		}
		<-stream.Context().Done()
		return status.FromContextError(stream.Context().Err()).Err()
	}
	chunk := func(text string) error {
		return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: &workerv1.Chunk{Text: text, TokenIds: []uint32{1},
			Logprobs: fakeLogprobs(req.GetLogprobs().GetOutput(), text, req.GetLogprobs().GetTop())}}})
	}
	final := func(r workerv1.FinishReason, desc string, completion uint32) error {
		return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{
			FinishReason: r, Description: desc, RequestId: req.GetRequestId(),
			Usage: &workerv1.Usage{PromptTokens: promptTokens(req), CompletionTokens: completion, CachedTokens: cached},
		}}})
	}
	if req.GetLogprobs().GetPrompt() {
		if err := stream.Send(fakePrompt(req)); err != nil {
			return err
		}
	} else if req.GetReturnPrompt() {
		ids := req.GetTokenIds().GetIds()
		if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: &workerv1.Prompt{
			TokenIds: ids, Text: fmt.Sprintf("<%d ids>", len(ids))}}}); err != nil {
			return err
		}
	}
	if script != nil {
		return scripted(req, stream, script, finish, reasoning)
	}
	if req.GetN() > 1 {
		return nChoices(req, stream, cached)
	}
	if tag && req.GetText() != "" {
		chunk = func(text string) error {
			tagged := text
			if text == "hello" {
				tagged = "[" + req.GetText() + "]" + text
			}
			return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: &workerv1.Chunk{Text: tagged, TokenIds: []uint32{1}}}})
		}
	}
	if ttft > 0 {
		time.Sleep(ttft)
	}
	if empty {
		return final(workerv1.FinishReason_FINISH_REASON_STOP, "", 0)
	}
	if err := chunk("hello"); err != nil {
		return err
	}
	if broken {
		if err := final(workerv1.FinishReason_FINISH_REASON_ERROR, "engine lost", 1); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "engine lost")
	}
	if err := chunk(" world"); err != nil {
		return err
	}
	if length {
		return final(workerv1.FinishReason_FINISH_REASON_LENGTH, "", 2)
	}
	return final(workerv1.FinishReason_FINISH_REASON_STOP, "", 2)
}

// nChoices answers a request for n > 1 choices as a worker does: choice j
// says "hello" and " world j", the chunks of the choices interleaved; odd
// choices end with LENGTH, even ones with STOP.
func nChoices(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse], cached uint32) error {
	n := req.GetN()
	for _, text := range []string{"hello", " world"} {
		for j := range n {
			t := text
			if text == " world" {
				t = fmt.Sprintf(" world %d", j)
			}
			if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: &workerv1.Chunk{Text: t, TokenIds: []uint32{1}, Index: j}}}); err != nil {
				return err
			}
		}
	}
	f := &workerv1.Final{FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, RequestId: req.GetRequestId(),
		Usage: &workerv1.Usage{PromptTokens: promptTokens(req), CompletionTokens: 2 * n, CachedTokens: cached}}
	for j := range n {
		r := workerv1.FinishReason_FINISH_REASON_STOP
		if j%2 == 1 {
			r = workerv1.FinishReason_FINISH_REASON_LENGTH
		}
		f.Choices = append(f.Choices, &workerv1.ChoiceFinal{Index: j, FinishReason: r, CompletionTokens: 2})
	}
	return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: f}})
}

// scripted answers with script for each of the request's choices, as
// fakeWorker.script says.
func scripted(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse], script []*workerv1.Chunk,
	finish workerv1.FinishReason, reasoning uint32) error {
	n := max(req.GetN(), 1)
	for _, c := range script {
		for j := range n {
			c := proto.CloneOf(c)
			c.Index = j
			if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: c}}); err != nil {
				return err
			}
		}
	}
	if finish == workerv1.FinishReason_FINISH_REASON_UNSPECIFIED {
		finish = workerv1.FinishReason_FINISH_REASON_STOP
	}
	return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{
		FinishReason: finish, RequestId: req.GetRequestId(),
		Usage: &workerv1.Usage{PromptTokens: promptTokens(req), CompletionTokens: uint32(len(script)), ReasoningTokens: reasoning},
	}}})
}

func promptTokens(req *workerv1.GenerateRequest) uint32 {
	if ids := req.GetTokenIds(); ids != nil {
		return uint32(len(ids.GetIds()))
	}
	return uint32(len(strings.Fields(req.GetText())))
}

// startWorker serves a fakeWorker of model on loopback until the test
// ends, its gRPC server with opts.
func startWorker(t *testing.T, id, model string, opts ...grpc.ServerOption) *fakeWorker {
	t.Helper()
	w := &fakeWorker{holding: make(chan struct{}), cancelled: make(chan struct{})}
	count := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		w.streams.Add(1)
		return h(srv, ss)
	}
	port := serveWorker(t, w, append(opts, grpc.StreamInterceptor(count))...)
	w.ep = discovery.Registration{WorkerID: id, Address: "127.0.0.1", Port: port, Model: model, Engine: "fake", InstanceID: id + "-1"}
	return w
}

// serveWorker serves srv on a loopback port, its gRPC server with opts,
// until the test ends, and returns the port.
func serveWorker(t *testing.T, srv workerv1.WorkerServer, opts ...grpc.ServerOption) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	workerv1.RegisterWorkerServer(s, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().(*net.TCPAddr).Port
}

func endpoints(ws ...*fakeWorker) []discovery.Registration {
	var eps []discovery.Registration
	for _, w := range ws {
		eps = append(eps, w.ep)
	}
	return eps
}

// testRouter is a router on loopback: its pool, gRPC client and HTTP
// server.
type testRouter struct {
	pool   *Pool
	proxy  *Proxy
	conn   *grpc.ClientConn
	client workerv1.WorkerClient
	http   *httptest.Server
}

type routerOption func(*ProxyConfig, *HTTPConfig)

func withRetries(n int) routerOption {
	return func(p *ProxyConfig, _ *HTTPConfig) { p.Retries = n }
}

func withTimeout(d time.Duration) routerOption {
	return func(p *ProxyConfig, _ *HTTPConfig) { p.RequestTimeout = d }
}

func withHeartbeat(d time.Duration) routerOption {
	return func(_ *ProxyConfig, h *HTTPConfig) { h.StreamHeartbeat = d }
}

func withMaxBody(n int64) routerOption {
	return func(_ *ProxyConfig, h *HTTPConfig) { h.MaxBodyBytes = n }
}

// startRouter serves a router over workers until the test ends.
func startRouter(t *testing.T, workers []*fakeWorker, opts ...routerOption) *testRouter {
	t.Helper()
	// Round-robin: these tests count which worker gets each request in turn.
	return startRouterAt(t, PoolConfig{Balance: RoundRobin}, endpoints(workers...), opts...)
}

// startRouterAt serves a router over the workers at eps, its pool
// configured by cfg (and the test's logger), until the test ends.
func startRouterAt(t *testing.T, cfg PoolConfig, eps []discovery.Registration, opts ...routerOption) *testRouter {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
	pcfg := ProxyConfig{Retries: DefaultRetries, RequestTimeout: DefaultRequestTimeout, Logger: log}
	hcfg := HTTPConfig{Logger: log}
	for _, o := range opts {
		o(&pcfg, &hcfg)
	}
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	pool := NewPool(cfg)
	pool.Update(eps)
	proxy := NewProxy(pool, pcfg)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := NewGRPCServer(proxy)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(NewHTTPHandler(proxy, hcfg))
	t.Cleanup(func() {
		hs.Close()
		cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("grpc Serve: %v", err)
		}
		pool.Close()
	})
	return &testRouter{pool: pool, proxy: proxy, conn: cc, client: workerv1.NewWorkerClient(cc), http: hs}
}

// testWriter sends log lines to t.Log, so they show only for failed tests.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// generated is what a client saw of one Generate call.
type generated struct {
	text    string
	ids     []uint32
	prompts int // prompt messages
	final   *workerv1.Final
	err     error
}

// generate calls Generate through the router's gRPC API and reads the
// whole stream.
func (r *testRouter) generate(ctx context.Context, model, prompt string) generated {
	return r.generateReq(ctx, &workerv1.GenerateRequest{Model: model, Prompt: &workerv1.GenerateRequest_Text{Text: prompt}})
}

// generateReq is generate for req.
func (r *testRouter) generateReq(ctx context.Context, req *workerv1.GenerateRequest) generated {
	stream, err := r.client.Generate(ctx, req)
	if err != nil {
		return generated{err: err}
	}
	var g generated
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return g
		}
		if err != nil {
			g.err = err
			return g
		}
		switch k := m.GetKind().(type) {
		case *workerv1.GenerateResponse_Prompt:
			g.prompts++
		case *workerv1.GenerateResponse_Chunk:
			g.text += k.Chunk.GetText()
			g.ids = append(g.ids, k.Chunk.GetTokenIds()...)
		case *workerv1.GenerateResponse_Final:
			g.final = k.Final
		}
	}
}

func counts(ws ...*fakeWorker) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s=%d", w.ep.WorkerID, w.requests.Load()))
	}
	return strings.Join(parts, " ")
}

// fakeLogprobs is a chunk's logprobs as a worker gives them when on: one
// position, its chosen token the chunk's text at -0.5, and top of the
// alternatives "hi" (-0.25, the likeliest) and the chosen one; an
// "unknown" chunk's chosen logprob is unknown (TensorRT-LLM's outside its
// top-k).
func fakeLogprobs(on bool, text string, top uint32) []*workerv1.TokenLogprob {
	if !on {
		return nil
	}
	chosen := &workerv1.Logprob{TokenId: 7, Token: text, Bytes: []byte(text), Logprob: proto.Float32(-0.5), Rank: 2}
	if text == "unknown" {
		chosen.Logprob = nil
	}
	alts := []*workerv1.Logprob{{TokenId: 8, Token: "hi", Bytes: []byte("hi"), Logprob: proto.Float32(-0.25), Rank: 1}, chosen}
	return []*workerv1.TokenLogprob{{Chosen: chosen, Top: alts[:min(int(top), len(alts))]}}
}

// fakePrompt is the prompt message with the prompt's logprobs: "A"
// (none, the first position) and " prompt" (-1.5).
func fakePrompt(req *workerv1.GenerateRequest) *workerv1.GenerateResponse {
	first := &workerv1.Logprob{TokenId: 1, Token: "A", Bytes: []byte("A")}
	second := &workerv1.Logprob{TokenId: 2, Token: " prompt", Bytes: []byte(" prompt"), Logprob: proto.Float32(-1.5), Rank: 1}
	return &workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: &workerv1.Prompt{
		TokenIds: []uint32{1, 2}, Text: "A prompt",
		Logprobs: []*workerv1.TokenLogprob{{Chosen: first}, {Chosen: second, Top: []*workerv1.Logprob{second}[:min(int(req.GetLogprobs().GetPromptTop()), 1)]}},
	}}}
}
