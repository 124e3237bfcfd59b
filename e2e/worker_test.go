package e2e

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vllmmock "github.com/vigilhq/vigil/plugins/vllm/mock"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// workerClient dials a worker (or router) endpoint.
func workerClient(t *testing.T, target string) workerv1.WorkerClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return workerv1.NewWorkerClient(conn)
}

// completion is what one Generate stream delivered.
type completion struct {
	tokens []uint32
	text   string
	final  *workerv1.Final
	err    error // the status the stream ended with
}

// generate runs one request to the end. onChunk, if set, is called after
// each chunk with the number of tokens so far.
func generate(ctx context.Context, c workerv1.WorkerClient, req *workerv1.GenerateRequest, onChunk func(n int)) completion {
	var out completion
	stream, err := c.Generate(ctx, req)
	if err != nil {
		out.err = err
		return out
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		if f := msg.GetFinal(); f != nil {
			out.final = f
			continue
		}
		out.tokens = append(out.tokens, msg.GetChunk().GetTokenIds()...)
		out.text += msg.GetChunk().GetText()
		if onChunk != nil {
			onChunk(len(out.tokens))
		}
	}
}

func tokenPrompt(id string, maxTokens uint32, ids ...uint32) *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{
		RequestId: id,
		Prompt:    &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: ids}},
		Stopping:  &workerv1.Stopping{MaxTokens: maxTokens},
	}
}

// servingWorker starts a mock and a vigil on the file registry and waits
// until the worker serves.
func servingWorker(t *testing.T, mockArgs []string, vigilArgs ...string) (*mock, *vigil) {
	t.Helper()
	m := startMock(t, mockArgs...)
	v := startVigil(t, vigilOpts{engineAddr: m.GRPC, discovery: "file", registry: t.TempDir(), service: "llm", extra: vigilArgs})
	v.waitLine("worker registered", 30*time.Second)
	return m, v
}

// TestGenerateThroughWorker: tokens stream through vigil exactly as the
// engine produced them, then one final message with usage.
func TestGenerateThroughWorker(t *testing.T) {
	skipShort(t)
	t.Parallel()
	_, v := servingWorker(t, []string{"--token-delay", "0"})
	c := workerClient(t, v.Listen)
	seed := int64(7)
	req := tokenPrompt("r1", 12, 5, 6, 7)
	req.Sampling = &workerv1.Sampling{Seed: &seed}
	got := generate(context.Background(), c, req, nil)
	if got.err != nil {
		t.Fatalf("Generate: %v", got.err)
	}
	var want []uint32
	var wantText strings.Builder
	for i := range 12 {
		id := vllmmock.OutputToken(seed, []uint32{5, 6, 7}, i)
		want = append(want, id)
		wantText.WriteString(vllmmock.TokenText(id))
	}
	if len(got.tokens) != len(want) {
		t.Fatalf("got %d tokens, want %d", len(got.tokens), len(want))
	}
	for i := range want {
		if got.tokens[i] != want[i] {
			t.Fatalf("token %d = %d, want %d", i, got.tokens[i], want[i])
		}
	}
	if got.text != wantText.String() {
		t.Errorf("text = %q, want %q", got.text, wantText.String())
	}
	f := got.final
	if f == nil || f.FinishReason != workerv1.FinishReason_FINISH_REASON_LENGTH ||
		f.Usage.GetPromptTokens() != 3 || f.Usage.GetCompletionTokens() != 12 || f.RequestId != "r1" {
		t.Errorf("final = %v, want LENGTH, usage 3+12, request id r1", f)
	}
}

// TestCancelAbortsEngineRequest: a client that cancels half-way gets its
// engine request aborted by id within 1s; other streams go on.
func TestCancelAbortsEngineRequest(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m, v := servingWorker(t, []string{"--token-delay", "20ms"})
	c := workerClient(t, v.Listen)

	var wg sync.WaitGroup
	others := make([]completion, 3)
	for i := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			others[i] = generate(context.Background(), c, tokenPrompt("other", 40, 1), nil)
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	res := generate(ctx, c, tokenPrompt("victim", 200, 2), func(n int) {
		if n == 10 {
			cancelled = time.Now()
			cancel()
		}
	})
	if status.Code(res.err) != codes.Canceled {
		t.Fatalf("cancelled stream ended with %v, want Canceled", res.err)
	}
	// The engine-side id is the client's id plus a per-request suffix.
	deadline := cancelled.Add(time.Second)
	for {
		var aborted []string
		for id := range m.state(t).Aborts {
			aborted = append(aborted, id)
		}
		if len(aborted) == 1 && strings.HasPrefix(aborted[0], "victim-") {
			break
		}
		if len(aborted) > 1 || time.Now().After(deadline) {
			t.Fatalf("aborts = %v at %s after the cancel, want exactly one victim-* within 1s", aborted, time.Since(cancelled))
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	for i, o := range others {
		if o.err != nil || len(o.tokens) != 40 {
			t.Errorf("other stream %d: %d tokens, err %v; want 40 tokens", i, len(o.tokens), o.err)
		}
	}
}

// TestBadRequests: bad requests are refused naming the field, and the
// worker keeps serving.
func TestBadRequests(t *testing.T) {
	skipShort(t)
	t.Parallel()
	_, v := servingWorker(t, []string{"--token-delay", "0"})
	c := workerClient(t, v.Listen)
	for _, tc := range []struct {
		name  string
		req   *workerv1.GenerateRequest
		code  codes.Code
		field string
	}{
		{"empty prompt", &workerv1.GenerateRequest{}, codes.InvalidArgument, "prompt"},
		{"empty token ids", tokenPrompt("x", 1), codes.InvalidArgument, "prompt"},
		{"max tokens beyond model length", tokenPrompt("x", 5000, 1), codes.InvalidArgument, "max_tokens"},
		{"other model", &workerv1.GenerateRequest{Model: "gpt-9", Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}}, codes.NotFound, "model"},
	} {
		got := generate(context.Background(), c, tc.req, nil)
		if status.Code(got.err) != tc.code || !strings.Contains(status.Convert(got.err).Message(), tc.field) {
			t.Errorf("%s: got %v, want %s naming %q", tc.name, got.err, tc.code, tc.field)
		}
	}
	if got := generate(context.Background(), c, tokenPrompt("ok", 3, 1), nil); got.err != nil || len(got.tokens) != 3 {
		t.Errorf("after bad requests: %d tokens, err %v; want 3 tokens", len(got.tokens), got.err)
	}
}

// TestDrainOnSIGTERM: requests in flight finish, vigil exits 0 as soon as
// they have (well before the grace period), and after the withdrawal no
// request is admitted or forwarded to the engine.
func TestDrainOnSIGTERM(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m, v := servingWorker(t, []string{"--token-delay", "20ms"}, "--grace-period", "30s")
	c := workerClient(t, v.Listen)

	var wg sync.WaitGroup
	results := make([]completion, 3)
	started := make(chan struct{}, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 100 tokens at 20ms: about 2s.
			results[i] = generate(context.Background(), c, tokenPrompt("inflight", 100, 1), func(n int) {
				if n == 1 {
					started <- struct{}{}
				}
			})
		}()
	}
	for range results {
		<-started
	}
	sent := time.Now()
	v.term(t)
	v.waitLine("worker deregistered", 10*time.Second)
	before := m.state(t).RequestsTotal
	late := generate(context.Background(), c, tokenPrompt("late", 1, 1), nil)
	if status.Code(late.err) != codes.Unavailable {
		t.Errorf("request after the withdrawal: %v, want Unavailable", late.err)
	}
	if code := v.wait(30 * time.Second); code != 0 {
		t.Fatalf("vigil exit code = %d, want 0", code)
	}
	if d := time.Since(sent); d > 15*time.Second {
		t.Errorf("vigil exited %s after SIGTERM, want well before the 30s grace period", d)
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil || len(r.tokens) != 100 || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
			t.Errorf("in-flight request %d: %d tokens, final %v, err %v; want all 100", i, len(r.tokens), r.final, r.err)
		}
	}
	if after := m.state(t).RequestsTotal; after != before {
		t.Errorf("engine received %d requests after the withdrawal, want 0", after-before)
	}
}

// TestEngineKilledMidStream: a request streaming from an engine that dies
// ends with a final error and UNAVAILABLE, not a hang; vigil exits 1.
func TestEngineKilledMidStream(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m, v := servingWorker(t, []string{"--token-delay", "20ms"})
	c := workerClient(t, v.Listen)
	res := generate(context.Background(), c, tokenPrompt("long", 1000, 1), func(n int) {
		if n == 5 {
			m.signal(syscall.SIGKILL)
		}
	})
	if status.Code(res.err) != codes.Unavailable {
		t.Errorf("stream ended with %v, want Unavailable", res.err)
	}
	if res.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR || res.final.GetDescription() == "" {
		t.Errorf("final = %v, want ERROR with a description", res.final)
	}
	if code := v.wait(exitBound); code != 1 {
		t.Errorf("vigil exit code = %d, want 1", code)
	}
}
