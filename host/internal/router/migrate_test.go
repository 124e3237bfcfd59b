package router

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// migrationTokens is the output of every resumer: token i's text is
// "t<i> ".
const migrationTokens = 6

// resumer is a worker that lists resume: its output is tokens 1 to
// migrationTokens, continued from a resumed request's output ids; each
// stream it serves gives two tokens, then breaks as its worker cannot
// finish it: the first (no output before) with a final that holds "h"
// back and RESUME_ELSEWHERE, the next as a worker that died (no final).
// The stream that reaches the end finishes with STOP.
type resumer struct {
	ep   discovery.Registration
	caps bool // lists resume; false: a worker without a tokenizer
	// engineError: the first break is the engine's own error, a final
	// without resume state, then UNAVAILABLE without the reason.
	engineError bool
	mu          sync.Mutex
	reqs        []*workerv1.GenerateRequest
	workerv1.UnimplementedWorkerServer
}

// migrationPrompt is the prompt's ids a resumer gives.
var migrationPrompt = []uint32{100, 101}

func (w *resumer) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	w.mu.Lock()
	w.reqs = append(w.reqs, proto.CloneOf(req))
	engineError := w.engineError
	w.mu.Unlock()
	if req.GetReturnPrompt() || req.GetLogprobs().GetPrompt() {
		if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: &workerv1.Prompt{TokenIds: migrationPrompt, Text: "<prompt>"}}}); err != nil {
			return err
		}
	}
	done := uint32(len(req.GetResume().GetOutputTokenIds()))
	text := ""
	if h := req.GetResume().GetHeldText(); h != "" {
		text = h // a worker's held text goes out ahead of the new text
	}
	for i := done + 1; i <= min(done+2, migrationTokens); i++ {
		c := &workerv1.Chunk{TokenIds: []uint32{i}, Text: text + fmt.Sprintf("t%d ", i), Index: req.GetResume().GetIndex()}
		text = ""
		if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: c}}); err != nil {
			return err
		}
	}
	usage := &workerv1.Usage{PromptTokens: uint32(len(migrationPrompt)), CompletionTokens: min(done+2, migrationTokens)}
	switch {
	case done+2 >= migrationTokens:
		return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, Usage: usage}}})
	case done > 0:
		return status.Error(codes.Unavailable, "error reading from server: EOF") // died
	}
	f := &workerv1.Final{FinishReason: workerv1.FinishReason_FINISH_REASON_ERROR, Description: "engine lost", Usage: usage,
		Resume: &workerv1.ResumeState{OutputTokens: 2, HeldText: "h"}}
	if engineError {
		f.Resume = nil
	}
	if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: f}}); err != nil {
		return err
	}
	if engineError {
		return status.Error(codes.Unavailable, "engine lost")
	}
	return workerapi.ResumeElsewhereError("engine lost", 2)
}

func (w *resumer) requests() []*workerv1.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reqs
}

// startResumer serves a resumer of model m on loopback until the test
// ends.
func startResumer(t *testing.T, id string, caps bool) *resumer {
	t.Helper()
	c := []discovery.Capability{{Name: discovery.CapPromptTokenIDs}, {Name: discovery.CapStop}, {Name: discovery.CapJSONObject}, {Name: discovery.CapPromptLogprobs}}
	if caps {
		c = append(c, discovery.Capability{Name: discovery.CapResume})
	}
	cs, err := discovery.NewCapabilities(c...)
	if err != nil {
		t.Fatal(err)
	}
	w := &resumer{caps: caps}
	w.ep = discovery.Registration{WorkerID: id, Address: "127.0.0.1", Port: serveWorker(t, w),
		Model: "m", ModelID: "org/m", Engine: "fake", InstanceID: id + "-1", Caps: cs}
	return w
}

func resumers(t *testing.T, n int, caps bool) ([]*resumer, []discovery.Registration) {
	var ws []*resumer
	var eps []discovery.Registration
	for i := range n {
		w := startResumer(t, fmt.Sprintf("w%d", i), caps)
		ws = append(ws, w)
		eps = append(eps, w.ep)
	}
	return ws, eps
}

func withMigrations(n int, o Observer) routerOption {
	return func(p *ProxyConfig, _ *HTTPConfig) { p.MaxMigrations, p.Observer = n, o }
}

func textRequest() *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{Model: "m", Prompt: &workerv1.GenerateRequest_Text{Text: "go"}}
}

// A stream broken twice (a worker's RESUME_ELSEWHERE end, then a worker
// that died) goes on, each time on another worker, from the prompt ids
// and output ids sent: the client sees one stream, every token once, the
// held text once, the last worker's usage and finish, and no prompt
// message it did not ask for.
func TestMigrationContinuesStream(t *testing.T) {
	t.Parallel()
	ws, eps := resumers(t, 3, true)
	rec := &migrationRecorder{}
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps, withMigrations(3, rec))
	got := r.generateReq(t.Context(), textRequest())
	if got.err != nil {
		t.Fatalf("stream failed: %v", got.err)
	}
	if want := "t1 t2 ht3 t4 t5 t6 "; got.text != want || len(got.ids) != migrationTokens || got.prompts != 0 {
		t.Errorf("client saw %q, ids %v, %d prompt messages; want %q, 6 ids, none", got.text, got.ids, got.prompts, want)
	}
	if f := got.final; f.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_STOP || f.GetUsage().GetCompletionTokens() != migrationTokens {
		t.Errorf("final %v, want STOP with 6 completion tokens", f)
	}
	var resumes []*workerv1.Resume
	asked := 0
	for _, w := range ws {
		for _, req := range w.requests() {
			if req.GetResume() == nil {
				asked++
				if !req.GetReturnPrompt() {
					t.Errorf("first request %v: want return_prompt, to keep the prompt's ids", req)
				}
				continue
			}
			if req.GetReturnPrompt() || req.GetLogprobs().GetPrompt() {
				t.Errorf("resumed request %v asks for the prompt again", req)
			}
			resumes = append(resumes, req.GetResume())
		}
	}
	want := []*workerv1.Resume{
		{PromptTokenIds: migrationPrompt, OutputTokenIds: []uint32{1, 2}, HeldText: proto.String("h")},
		{PromptTokenIds: migrationPrompt, OutputTokenIds: []uint32{1, 2, 3, 4}},
	}
	slices.SortFunc(resumes, func(a, b *workerv1.Resume) int { return len(a.GetOutputTokenIds()) - len(b.GetOutputTokenIds()) })
	if asked != 1 || !cmp.Equal(want, resumes, cmpProto) {
		t.Errorf("%d first requests, resumes %v; want 1 and %v", asked, resumes, want)
	}
	if diff := cmp.Diff([]string{"m resumed", "m resumed"}, rec.get()); diff != "" {
		t.Errorf("migrations observed (-want +got):\n%s", diff)
	}
}

// A client that asks for the prompt message itself (echo, the prompt's
// logprobs) gets it once, from the first worker, and the stream still
// moves on.
func TestMigrationKeepsPromptMessage(t *testing.T) {
	t.Parallel()
	for name, ask := range map[string]func(*workerv1.GenerateRequest){
		"return_prompt":   func(r *workerv1.GenerateRequest) { r.ReturnPrompt = true },
		"prompt logprobs": func(r *workerv1.GenerateRequest) { r.Logprobs = &workerv1.Logprobs{Prompt: true} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, eps := resumers(t, 3, true)
			r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps, withMigrations(3, nil))
			req := textRequest()
			ask(req)
			got := r.generateReq(t.Context(), req)
			if got.err != nil || got.prompts != 1 || got.text != "t1 t2 ht3 t4 t5 t6 " {
				t.Errorf("client saw %d prompt messages, %q, then %v; want 1, every token once, OK", got.prompts, got.text, got.err)
			}
		})
	}
}

// Without migration (--max-migrations 0), past its limit, for a request
// that cannot be resumed (n > 1, structured output, tool_choice
// required), among workers that cannot resume, or when the worker's
// final says the engine failed (no RESUME_ELSEWHERE), the client gets the
// worker's failure as before: its error final, then UNAVAILABLE.
func TestMigrationNot(t *testing.T) {
	t.Parallel()
	structured := textRequest()
	structured.StructuredOutput = &workerv1.StructuredOutput{Kind: &workerv1.StructuredOutput_JsonObject{JsonObject: true}}
	for _, c := range []struct {
		name     string
		max      int
		caps     bool
		req      *workerv1.GenerateRequest
		text     string
		observed []string
	}{
		{"off", 0, true, textRequest(), "t1 t2 ", nil},
		{"past the limit", 1, true, textRequest(), "t1 t2 ht3 t4 ", []string{"m resumed"}},
		{"structured output", 3, true, structured, "t1 t2 ", nil},
		{"no worker resumes", 3, false, textRequest(), "t1 t2 ", nil},
		{"the engine's own error", 3, true, textRequest(), "t1 t2 ", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, eps := resumers(t, 3, c.caps)
			for _, w := range ws {
				w.mu.Lock()
				w.engineError = c.name == "the engine's own error"
				w.mu.Unlock()
			}
			rec := &migrationRecorder{}
			r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps, withMigrations(c.max, rec))
			got := r.generateReq(t.Context(), c.req)
			if status.Code(got.err) != codes.Unavailable || got.text != c.text {
				t.Errorf("client saw %q, then %v; want %q, then UNAVAILABLE", got.text, got.err, c.text)
			}
			if c.max != 1 && got.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR {
				t.Errorf("final %v, want the worker's ERROR final", got.final)
			}
			if diff := cmp.Diff(c.observed, rec.get()); diff != "" {
				t.Errorf("migrations observed (-want +got):\n%s", diff)
			}
		})
	}
}

// A stream that no other worker can take on (the only other worker
// serves another model id) ends as its worker ended it, and the move is
// counted as failed.
func TestMigrationNoWorker(t *testing.T) {
	t.Parallel()
	a, b := startResumer(t, "a", true), startResumer(t, "b", true)
	b.ep.ModelID = "org/other"
	rec := &migrationRecorder{}
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, []discovery.Registration{a.ep, b.ep}, withMigrations(3, rec))
	var got generated
	for range 2 { // one of the two starts on a, whose stream b cannot go on with
		got = r.generateReq(t.Context(), textRequest())
		if len(a.requests()) > 0 {
			break
		}
	}
	if status.Code(got.err) != codes.Unavailable || got.text != "t1 t2 " || got.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR {
		t.Errorf("client saw %q, final %v, then %v; want the first worker's end", got.text, got.final, got.err)
	}
	if msg := status.Convert(got.err).Message(); msg != "engine lost" {
		t.Errorf("error %q, want the worker's", msg)
	}
	if diff := cmp.Diff([]string{"m failed"}, rec.get()); diff != "" {
		t.Errorf("migrations observed (-want +got):\n%s", diff)
	}
}

// Over HTTP a migrated stream is one completion: the text of every
// token once, finish_reason stop, and the usage of all of them.
func TestMigrationHTTP(t *testing.T) {
	t.Parallel()
	_, eps := resumers(t, 3, true)
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, eps, withMigrations(3, nil))
	code, _, body := r.do(t, "POST", "/v1/completions", `{"model":"m","prompt":"go","stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var text, finish string
	var usage map[string]any
	for _, e := range sseEvents(t, body) {
		if e == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		for _, c := range ev.Choices {
			text += c.Text
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ev.Usage != nil {
			usage = ev.Usage
		}
	}
	if text != "t1 t2 ht3 t4 t5 t6 " || finish != "stop" || usage["completion_tokens"] != float64(migrationTokens) {
		t.Errorf("text %q, finish %q, usage %v; want every token once, stop, 6 completion tokens", text, finish, usage)
	}
}

// migrationRecorder is an Observer that keeps the migrations it is told
// of, as "model result".
type migrationRecorder struct {
	recorder
	mu   sync.Mutex
	seen []string
}

func (m *migrationRecorder) Migration(model, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, model+" "+result)
}

func (m *migrationRecorder) get() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen
}

var cmpProto = cmp.Comparer(func(a, b *workerv1.Resume) bool { return proto.Equal(a, b) })

// oddWorker lists resume and fails as told: lostEarly sends the prompt
// message it was asked for, then fails before any output, as a worker
// whose engine was lost a moment before; otherwise it sends a chunk and
// its STOP final, then breaks, as a vigil killed before the stream's
// trailers.
type oddWorker struct {
	lostEarly bool
	requests  atomic.Int64
	workerv1.UnimplementedWorkerServer
}

func (w *oddWorker) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	w.requests.Add(1)
	if req.GetReturnPrompt() {
		if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: &workerv1.Prompt{TokenIds: migrationPrompt}}}); err != nil {
			return err
		}
	}
	if w.lostEarly {
		return status.Error(codes.Unavailable, "engine unavailable")
	}
	for _, m := range []*workerv1.GenerateResponse{
		{Kind: &workerv1.GenerateResponse_Chunk{Chunk: &workerv1.Chunk{TokenIds: []uint32{1}, Text: "a"}}},
		{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, Usage: &workerv1.Usage{CompletionTokens: 1}}}},
	} {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "error reading from server: EOF")
}

func startOdd(t *testing.T, id string, w *oddWorker) discovery.Registration {
	caps, err := discovery.NewCapabilities(discovery.Capability{Name: discovery.CapPromptTokenIDs}, discovery.Capability{Name: discovery.CapResume})
	if err != nil {
		t.Fatal(err)
	}
	return discovery.Registration{WorkerID: id, Address: "127.0.0.1", Port: serveWorker(t, w), Model: "m", ModelID: "org/m", Engine: "fake", InstanceID: id + "-1", Caps: caps}
}

// The prompt message the router asks for, to be able to move the stream,
// is not the stream's start: a worker that fails after it, before any
// output, is retried as before, on any worker, resume or not.
func TestMigrationPromptIsNoStart(t *testing.T) {
	t.Parallel()
	lost := &oddWorker{lostEarly: true}
	b := startWorker(t, "b", "m")
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, []discovery.Registration{startOdd(t, "lost", lost), b.ep}, withMigrations(3, nil))
	for i := range 2 { // round-robin: one of them starts on the lost worker
		if g := r.generate(t.Context(), "m", "hi"); g.err != nil || g.text != "hello world" || g.prompts != 0 {
			t.Errorf("request %d: %q, %d prompt messages, then %v; want hello world from the other worker", i, g.text, g.prompts, g.err)
		}
	}
	if lost.requests.Load() == 0 {
		t.Error("the lost worker got no request")
	}
}

// A stream that broke after its final reached the client is not moved:
// it had ended.
func TestMigrationNotAfterFinal(t *testing.T) {
	t.Parallel()
	a, b := &oddWorker{}, &oddWorker{}
	r := startRouterAt(t, PoolConfig{Balance: RoundRobin}, []discovery.Registration{startOdd(t, "a", a), startOdd(t, "b", b)}, withMigrations(3, nil))
	g := r.generate(t.Context(), "m", "hi")
	if g.text != "a" || g.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_STOP || status.Code(g.err) != codes.Unavailable {
		t.Errorf("client saw %q, final %v, then %v; want the one stream as it came", g.text, g.final, g.err)
	}
	if n := a.requests.Load() + b.requests.Load(); n != 1 {
		t.Errorf("%d requests reached the workers, want 1", n)
	}
}
