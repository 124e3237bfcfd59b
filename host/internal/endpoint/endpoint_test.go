package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeEngine streams n tokens per request; with hold set, each request
// waits after its first token until hold is closed or its ctx ends. Abort
// records the ids it is given and answers abortErr, after abortBlock
// closes (nil: at once) or its ctx ends.
type fakeEngine struct {
	hold       chan struct{}
	mu         sync.Mutex
	ids        []string
	prompts    [][]uint32 // each request's token ids
	texts      []string   // each request's text
	stops      [][]string // each request's stop strings
	maxTokens  []uint32   // each request's max_tokens
	last       sdk.GenerateRequest
	aborted    []string
	abortErr   error
	abortBlock chan struct{}
	started    chan string
}

func (f *fakeEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	f.mu.Lock()
	f.ids = append(f.ids, req.RequestID)
	f.prompts = append(f.prompts, req.TokenIDs)
	f.texts = append(f.texts, req.Text)
	f.stops = append(f.stops, req.Stop)
	f.maxTokens = append(f.maxTokens, req.MaxTokens)
	f.last = req
	f.mu.Unlock()
	if err := send(sdk.Chunk{TokenIDs: []uint32{1}, Text: "a"}); err != nil {
		return sdk.Result{}, err
	}
	if f.started != nil {
		f.started <- req.RequestID
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return sdk.Result{}, ctx.Err()
		}
	}
	if err := send(sdk.Chunk{TokenIDs: []uint32{2}, Text: "b"}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: 1, CompletionTokens: 2}, nil
}

func (f *fakeEngine) Abort(ctx context.Context, ids []string) error {
	f.mu.Lock()
	f.aborted = append(f.aborted, ids...)
	f.mu.Unlock()
	if f.abortBlock != nil {
		select {
		case <-f.abortBlock:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.abortErr
}

// Aborted returns the ids Abort was given, sorted.
func (f *fakeEngine) Aborted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.aborted))
}

func serve(t testing.TB, e sdk.Generator, w sdk.Worker, maxInflight int) (*Server, workerv1.WorkerClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(lis, maxInflight, hclog.NewNullLogger())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve() }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); s.Close(); <-done })
	if e != nil {
		s.Attach(e, w)
	}
	return s, workerv1.NewWorkerClient(conn)
}

var worker = sdk.Worker{ServedModelName: "m", MaxModelLen: 100, SupportsTextInput: true}

func prompt(ids ...uint32) *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{RequestId: "r", Prompt: &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: ids}}}
}

// result is what a worker stream carried: its token ids counted, each
// chunk's text, the final message and the stream's error.
type result struct {
	tokens int
	texts  []string
	final  *workerv1.Final
	err    error
}

func run(ctx context.Context, c workerv1.WorkerClient, req *workerv1.GenerateRequest) result {
	var r result
	stream, err := c.Generate(ctx, req)
	if err != nil {
		r.err = err
		return r
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			r.err = err
			return r
		}
		if f := m.GetFinal(); f != nil {
			r.final = f
		} else {
			r.tokens += len(m.GetChunk().GetTokenIds())
			r.texts = append(r.texts, m.GetChunk().GetText())
		}
	}
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	s, c := serve(t, &fakeEngine{}, worker, 0)
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "starting") {
		t.Errorf("before Admit: %v, want Unavailable (starting)", r.err)
	}
	s.Admit(true, "")
	if r := run(t.Context(), c, prompt(1)); r.err != nil || r.tokens != 2 || r.final.GetUsage().GetCompletionTokens() != 2 {
		t.Errorf("admitted: %+v, want 2 tokens and usage", r)
	}
	s.Admit(false, "worker not ready")
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "not ready") {
		t.Errorf("not ready: %v, want Unavailable (not ready)", r.err)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	tokenOnly := worker
	tokenOnly.SupportsTextInput = false
	s, c := serve(t, &fakeEngine{}, tokenOnly, 0)
	s.Admit(true, "")
	temp := float32(-1)
	topP := float32(1.5)
	tooMany := &workerv1.Stopping{MaxTokens: 3, MinTokens: 4}
	for name, tc := range map[string]struct {
		req   *workerv1.GenerateRequest
		code  codes.Code
		field string
	}{
		"no prompt":   {&workerv1.GenerateRequest{}, codes.InvalidArgument, "prompt"},
		"empty ids":   {prompt(), codes.InvalidArgument, "prompt"},
		"text prompt": {&workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}}, codes.InvalidArgument, "token ids only"},
		"too long":    {&workerv1.GenerateRequest{Prompt: prompt(1, 2).Prompt, Stopping: &workerv1.Stopping{MaxTokens: 99}}, codes.InvalidArgument, "stopping.max_tokens"},
		"temperature": {&workerv1.GenerateRequest{Prompt: prompt(1).Prompt, Sampling: &workerv1.Sampling{Temperature: &temp}}, codes.InvalidArgument, "sampling.temperature"},
		"top_p":       {&workerv1.GenerateRequest{Prompt: prompt(1).Prompt, Sampling: &workerv1.Sampling{TopP: &topP}}, codes.InvalidArgument, "sampling.top_p"},
		"min_p":       {&workerv1.GenerateRequest{Prompt: prompt(1).Prompt, Sampling: &workerv1.Sampling{MinP: 1.5}}, codes.InvalidArgument, "sampling.min_p"},
		"min_tokens":  {&workerv1.GenerateRequest{Prompt: prompt(1).Prompt, Stopping: tooMany}, codes.InvalidArgument, "stopping.min_tokens: 4 exceeds stopping.max_tokens 3"},
		"model":       {&workerv1.GenerateRequest{Model: "x", Prompt: prompt(1).Prompt}, codes.NotFound, `model "x"`},
	} {
		r := run(t.Context(), c, tc.req)
		if status.Code(r.err) != tc.code || !strings.Contains(status.Convert(r.err).Message(), tc.field) {
			t.Errorf("%s: %v, want %s naming %q", name, r.err, tc.code, tc.field)
		}
	}
	if s.InFlight() != 0 {
		t.Errorf("in flight after refusals = %d, want 0", s.InFlight())
	}
}

// Engine-side ids are unique per request even when clients reuse one.
func TestEngineRequestIDsUnique(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	for range 3 {
		if r := run(t.Context(), c, prompt(1)); r.err != nil || r.final.GetRequestId() != "r" {
			t.Fatalf("request: %+v, want final with the client's id", r)
		}
	}
	seen := map[string]bool{}
	for _, id := range e.ids {
		if seen[id] || !strings.HasPrefix(id, "r-") {
			t.Errorf("engine ids %v: want distinct ids prefixed with the client's", e.ids)
		}
		seen[id] = true
	}
}

func TestMaxInflight(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{hold: make(chan struct{}), started: make(chan string, 1)}
	s, c := serve(t, e, worker, 1)
	s.Admit(true, "")
	first := make(chan result, 1)
	go func() { first <- run(t.Context(), c, prompt(1)) }()
	<-e.started
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("second request: %v, want ResourceExhausted", r.err)
	}
	close(e.hold)
	if r := <-first; r.err != nil || r.tokens != 2 {
		t.Errorf("first request: %+v, want it to complete", r)
	}
}

// Drain returns as soon as nothing is in flight; at the end of the grace
// period the rest end with a final error and UNAVAILABLE.
func TestDrain(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{hold: make(chan struct{}), started: make(chan string, 2)}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	results := make(chan result, 2)
	for range 2 {
		go func() { results <- run(t.Context(), c, prompt(1)) }()
	}
	<-e.started
	<-e.started
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.Drain(ctx, time.Second); err != nil {
		t.Errorf("Drain() = %v, want nil", err)
	}
	if s.InFlight() != 0 {
		t.Errorf("in flight after Drain = %d, want 0", s.InFlight())
	}
	for range 2 {
		r := <-results
		if status.Code(r.err) != codes.Unavailable || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR ||
			!strings.Contains(r.final.GetDescription(), "grace period") || r.final.GetUsage().GetCompletionTokens() != 1 {
			t.Errorf("request cut by the grace period: %+v, want final ERROR (grace period, 1 token) then Unavailable", r)
		}
		// Another worker can go on with it.
		if !workerapi.ResumeElsewhere(r.err) || r.final.GetResume().GetOutputTokens() != 1 {
			t.Errorf("request cut by the grace period: %v, resume %v; want RESUME_ELSEWHERE and 1 output token", r.err, r.final.GetResume())
		}
	}
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "draining") {
		t.Errorf("after Drain: %v, want Unavailable (draining)", r.err)
	}
	// With nothing in flight, Drain returns at once.
	if err := s.Drain(t.Context(), time.Second); err != nil {
		t.Errorf("Drain() with nothing in flight = %v, want nil", err)
	}
}

// Requests the grace period cuts are aborted at the engine, by their
// engine-side ids, before Drain returns; with nothing forwarded there is
// nothing to abort.
func TestDrainAbortsCutRequests(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{hold: make(chan struct{}), started: make(chan string, 2)}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	results := make(chan result, 2)
	for range 2 {
		go func() { results <- run(t.Context(), c, prompt(1)) }()
	}
	want := []string{<-e.started, <-e.started}
	slices.Sort(want)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the grace period is over
	if err := s.Drain(ctx, 5*time.Second); err != nil {
		t.Errorf("Drain() = %v, want nil", err)
	}
	if got := e.Aborted(); !slices.Equal(got, want) {
		t.Errorf("engine aborted %v when Drain returned, want the cut requests' engine ids %v", got, want)
	}
	for range 2 {
		<-results
	}
}

// An engine that does not answer the abort, or one that fails it, is
// reported by Drain, within its bound; an adapter without Abort is not.
func TestDrainAbortUnanswered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		block    bool
		err      error
		deadline bool // the error wraps context.DeadlineExceeded
		says     string
	}{
		{"unanswered", true, nil, true, "no answer within 100ms"},
		{"failed", false, errors.New("engine gone"), false, "engine gone"},
		{"unimplemented", false, sdk.ErrUnimplemented, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &fakeEngine{hold: make(chan struct{}), started: make(chan string, 1), abortErr: tc.err}
			if tc.block {
				e.abortBlock = make(chan struct{})
				defer close(e.abortBlock)
			}
			s, c := serve(t, e, worker, 0)
			s.Admit(true, "")
			done := make(chan result, 1)
			go func() { done <- run(t.Context(), c, prompt(1)) }()
			<-e.started
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			const bound = 100 * time.Millisecond
			start := time.Now()
			err := s.Drain(ctx, bound)
			if d := time.Since(start); d > bound+time.Second {
				t.Errorf("Drain returned after %s, want within its %s bound", d, bound)
			}
			switch {
			case tc.says == "" && err != nil:
				t.Errorf("Drain() = %v, want nil", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("Drain() = %v, want an error saying %q", err, tc.says)
			case errors.Is(err, context.DeadlineExceeded) != tc.deadline:
				t.Errorf("Drain() = %v: wraps context.DeadlineExceeded %v, want %v", err, !tc.deadline, tc.deadline)
			}
			<-done
		})
	}
}

// Abandon, for an adapter that stopped answering, ends the requests in
// flight at once with UNAVAILABLE and its reason, refuses new ones, and
// asks the engine to abort nothing, then or in a later Drain: the adapter
// could not relay it, and a Drain waiting for it would outlive its bound.
func TestAbandon(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{hold: make(chan struct{}), started: make(chan string, 2), abortBlock: make(chan struct{})}
	defer close(e.abortBlock)
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	results := make(chan result, 2)
	for range 2 {
		go func() { results <- run(t.Context(), c, prompt(1)) }()
	}
	<-e.started
	<-e.started
	const reason = "worker draining: engine adapter not answering"
	s.Abandon(reason)
	for range 2 {
		select {
		case r := <-results:
			if status.Code(r.err) != codes.Unavailable || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR ||
				r.final.GetDescription() != reason {
				t.Errorf("request in flight when abandoned: %+v, want final ERROR %q then Unavailable", r, reason)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a request in flight did not end within 5s of Abandon")
		}
	}
	if r := run(t.Context(), c, prompt(1)); status.Code(r.err) != codes.Unavailable || !strings.Contains(r.err.Error(), "not answering") {
		t.Errorf("after Abandon: %v, want Unavailable saying why", r.err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Drain(ctx, 100*time.Millisecond); err != nil {
		t.Errorf("Drain() after Abandon = %v, want nil", err)
	}
	if got := e.Aborted(); len(got) != 0 {
		t.Errorf("engine asked to abort %v after Abandon, want nothing", got)
	}
}

// sizedText is a text request whose encoded size is exactly n bytes.
func sizedText(n int) *workerv1.GenerateRequest {
	req := &workerv1.GenerateRequest{RequestId: "big"}
	text := n
	for {
		req.Prompt = &workerv1.GenerateRequest_Text{Text: strings.Repeat("x", text)}
		size := proto.Size(req)
		if size == n {
			return req
		}
		text += n - size
	}
}

// The endpoint takes requests up to workerapi.MaxRequestBytes; gRPC refuses a larger
// one with RESOURCE_EXHAUSTED naming the limit before the engine sees it.
func TestMaxRequestBytes(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	if r := run(t.Context(), c, sizedText(workerapi.MaxRequestBytes)); r.err != nil || r.tokens != 2 {
		t.Fatalf("request of MaxRequestBytes: %+v, want it served", r)
	}
	r := run(t.Context(), c, sizedText(workerapi.MaxRequestBytes+1))
	if status.Code(r.err) != codes.ResourceExhausted || !strings.Contains(r.err.Error(), fmt.Sprint(workerapi.MaxRequestBytes)) {
		t.Errorf("request of MaxRequestBytes+1: %v, want ResourceExhausted naming %d", r.err, workerapi.MaxRequestBytes)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ids) != 1 {
		t.Errorf("engine saw %d requests, want 1 (the one within the limit)", len(e.ids))
	}
}

// The router's manual and the worker API's proto give the limit as a
// number of bytes: it must be this one.
func TestMaxRequestBytesDocumented(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"docs/router.md", "proto/vigil/worker/v1/worker.proto"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), strconv.Itoa(workerapi.MaxRequestBytes)) {
			t.Errorf("%s does not give the worker's request limit, %d bytes", doc, workerapi.MaxRequestBytes)
		}
	}
}

// TestReflection: the worker endpoint serves gRPC server reflection, so
// that grpcurl lists and calls its services without the protos.
func TestReflection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(lis, 0, hclog.NewNullLogger())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve() }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(); s.Close(); <-done }()
	got := listServices(t, conn)
	for _, want := range []string{workerv1.Worker_ServiceDesc.ServiceName, healthpb.Health_ServiceDesc.ServiceName} {
		if !slices.Contains(got, want) {
			t.Errorf("reflection lists %v, want %s among them", got, want)
		}
	}
}

// listServices asks conn's server, by the reflection v1 API, which
// services it serves.
func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

// The worker API's sampling and stopping fields reach the adapter.
func TestSamplingForwarded(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	temp, topP, topK, seed := float32(0.5), float32(0.9), uint32(40), int64(7)
	req := prompt(1)
	req.Sampling = &workerv1.Sampling{Temperature: &temp, TopP: &topP, TopK: &topK, Seed: &seed, MinP: 0.05}
	req.Stopping = &workerv1.Stopping{MaxTokens: 9, MinTokens: 4, StopTokenIds: []uint32{3}, Stop: []string{"x"}, IgnoreEos: true}
	if r := run(t.Context(), c, req); r.err != nil {
		t.Fatal(r.err)
	}
	e.mu.Lock()
	got := e.last
	e.mu.Unlock()
	want := sdk.GenerateRequest{RequestID: got.RequestID, TokenIDs: []uint32{1}, Temperature: &temp, TopP: &topP, TopK: &topK,
		Seed: &seed, MaxTokens: 9, MinTokens: 4, MinP: 0.05, StopTokenIDs: []uint32{3}, Stop: []string{"x"}, IgnoreEOS: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("engine request (-want +got):\n%s", diff)
	}
}

// A request meant for another worker id (workerapi.MetaWorkerID, as vigil
// route sends it) gets UNAVAILABLE with a WORKER_MISMATCH ErrorInfo naming
// both ids, and never reaches the engine; one naming this worker, or none
// (a router of the release before), is served.
func TestWorkerIDMismatch(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 0)
	s.SetWorkerID("w-new")
	s.Admit(true, "")
	for _, tc := range []struct {
		name string
		md   []string
	}{{"this worker", []string{workerapi.MetaWorkerID, "w-new"}}, {"no id", nil}} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), tc.md...)
		if r := run(ctx, c, prompt(1)); r.err != nil || r.tokens != 2 {
			t.Errorf("%s: %+v, want served", tc.name, r)
		}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), workerapi.MetaWorkerID, "w-old")
	r := run(ctx, c, prompt(1))
	st := status.Convert(r.err)
	if st.Code() != codes.Unavailable || r.tokens != 0 {
		t.Fatalf("another worker's id: %+v, want UNAVAILABLE before any token", r)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		info, _ = d.(*errdetails.ErrorInfo)
	}
	want := map[string]string{workerapi.MetaExpectedWorkerID: "w-old", workerapi.MetaAnsweringWorkerID: "w-new"}
	if info.GetReason() != workerapi.ReasonWorkerMismatch || info.GetDomain() != workerapi.ErrorDomain || !cmp.Equal(info.GetMetadata(), want) {
		t.Errorf("ErrorInfo = %v, want reason %s, domain %s, metadata %v", info, workerapi.ReasonWorkerMismatch, workerapi.ErrorDomain, want)
	}
	if answering, ok := workerapi.WorkerMismatch(r.err); !ok || answering != "w-new" {
		t.Errorf("workerapi.WorkerMismatch = %q, %v; want w-new, true", answering, ok)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ids) != 2 {
		t.Errorf("the engine got %d requests, want 2: the mismatched one must not reach it", len(e.ids))
	}
}
