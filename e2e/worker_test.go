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

	"github.com/vigilhq/vigil/e2e/harness"
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

// servingWorker starts e's mock and a vigil on the file registry and waits
// until the worker serves.
func servingWorker(t *testing.T, e *engine, mo harness.MockOpts, vigilArgs ...string) (*mock, *vigil) {
	t.Helper()
	m := startMock(t, e, mo)
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: t.TempDir(), service: "llm", extra: vigilArgs})
	v.waitLine("worker registered", 30*time.Second)
	return m, v
}

// TestGenerateThroughWorker: tokens stream through vigil exactly as the
// engine produced them, then one final message with usage. The request
// carries a sampling seed when the engine takes one.
func TestGenerateThroughWorker(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		_, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(0)})
		c := workerClient(t, v.Listen)
		req := tokenPrompt("r1", 12, 5, 6, 7)
		var seed int64 // the mock's when the request has none
		if e.seeds {
			seed = 7
			req.Sampling = &workerv1.Sampling{Seed: &seed}
		}
		got := generate(context.Background(), c, req, nil)
		if got.err != nil {
			t.Fatalf("Generate: %v", got.err)
		}
		var want []uint32
		var wantText strings.Builder
		for i := range 12 {
			id := e.outputToken(seed, []uint32{5, 6, 7}, i)
			want = append(want, id)
			if e.tokenText != nil {
				wantText.WriteString(e.tokenText(id))
			}
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
	})
}

// TestCancelAbortsEngineRequest: a client that cancels half-way gets its
// engine request aborted by id within 1s; other streams go on.
func TestCancelAbortsEngineRequest(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, testCancelAbortsEngineRequest)
}

func testCancelAbortsEngineRequest(t *testing.T, e *engine) {
	skipWithoutRequests(t, e)
	m, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)})
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
	forEachEngine(t, testBadRequests)
}

type badRequest struct {
	name  string
	req   *workerv1.GenerateRequest
	code  codes.Code
	field string
}

func testBadRequests(t *testing.T, e *engine) {
	skipWithoutRequests(t, e)
	_, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(0)})
	c := workerClient(t, v.Listen)
	cases := []badRequest{
		{"empty prompt", &workerv1.GenerateRequest{}, codes.InvalidArgument, "prompt"},
		{"empty token ids", tokenPrompt("x", 1), codes.InvalidArgument, "prompt"},
		{"other model", &workerv1.GenerateRequest{Model: "gpt-9", Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}}, codes.NotFound, "model"},
	}
	if e.maxModelLen > 0 {
		cases = append(cases, badRequest{"max tokens beyond model length", tokenPrompt("x", e.maxModelLen+1, 1), codes.InvalidArgument, "max_tokens"})
	}
	if !e.textPrompts {
		cases = append(cases, badRequest{"text prompt", &workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}}, codes.InvalidArgument, "prompt"})
	}
	for _, tc := range cases {
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
	m, v := servingWorker(t, firstEngine(), harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)}, "--grace-period", "30s")
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
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		m, v := servingWorker(t, e, harness.MockOpts{TokenDelay: delay(20 * time.Millisecond)})
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
	})
}

// TestServedModelName: --served-model-name replaces the engine's served
// model name wherever vigil uses it. Consul's meta and the file record
// carry the override as model (model_id stays the engine's), the "engine
// serving" line logs it, and the worker answers requests for it, or for no
// model, while the engine's own name gets NOT_FOUND naming the override:
// the worker advertises only the override, so a client asking for the
// engine's name has the wrong worker.
func TestServedModelName(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const override = "team/alias-model"
	e := firstEngine()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{TokenDelay: delay(0)})
	dir := t.TempDir()
	workers := map[string]*vigil{
		"consul": startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
			extra: []string{"--served-model-name", override}}),
		"file": startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, discovery: "file", registry: dir, service: svc,
			extra: []string{"--served-model-name", override}}),
	}

	entries, _ := c.passing(t, svc, 30*time.Second, count(1))
	if meta := entries[0].Service.Meta; meta["model"] != override || meta["model_id"] != e.modelID {
		t.Errorf("Consul meta model %q, model_id %q; want %q, %q", meta["model"], meta["model_id"], override, e.modelID)
	}
	rec, _ := waitFile(t, workers["file"].RecordPath(dir, svc), true, 30*time.Second)
	if rec.Model != override || rec.Meta["model"] != override || rec.Meta["model_id"] != e.modelID {
		t.Errorf("file record model %q, meta model %q, meta model_id %q; want %q, %q, %q",
			rec.Model, rec.Meta["model"], rec.Meta["model_id"], override, override, e.modelID)
	}

	for name, v := range workers {
		t.Run(name, func(t *testing.T) {
			line := v.waitLine("engine serving", 30*time.Second)
			if !strings.Contains(line, "model="+override+" ") || !strings.Contains(line, "engine_served_model_name="+e.servedModel) {
				t.Errorf("log line %q, want model=%s and the engine's own name %s", line, override, e.servedModel)
			}
			v.waitLine("worker registered", 30*time.Second)
			wc := workerClient(t, v.Listen)
			for _, model := range []string{override, ""} {
				req := tokenPrompt("ok", 3, 1)
				req.Model = model
				if got := generate(context.Background(), wc, req, nil); got.err != nil || len(got.tokens) != 3 {
					t.Errorf("model %q: %d tokens, err %v; want 3 tokens", model, len(got.tokens), got.err)
				}
			}
			req := tokenPrompt("own", 3, 1)
			req.Model = e.servedModel
			got := generate(context.Background(), wc, req, nil)
			if status.Code(got.err) != codes.NotFound || !strings.Contains(status.Convert(got.err).Message(), override) {
				t.Errorf("the engine's own name %q: %v, want NotFound naming %q", e.servedModel, got.err, override)
			}
		})
	}
}
