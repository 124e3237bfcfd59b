package endpoint

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// seedEngine answers each request with its seed as its one token id, then
// the seed again, 2 prompt tokens (1 cached) and 2 completion tokens; a
// request whose seed is failSeed fails after its first chunk, and with
// hold set, the others wait after their first chunk until their ctx ends.
type seedEngine struct {
	failSeed int64
	hold     bool
	mu       sync.Mutex
	ids      []string
	seeds    []int64
	ended    chan string // each request's id as it returns, when not nil
}

func (e *seedEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if e.ended != nil {
		defer func() { e.ended <- req.RequestID }()
	}
	seed := *req.Seed
	e.mu.Lock()
	e.ids, e.seeds = append(e.ids, req.RequestID), append(e.seeds, seed)
	e.mu.Unlock()
	if err := send(sdk.Chunk{TokenIDs: []uint32{uint32(seed)}}); err != nil {
		return sdk.Result{}, err
	}
	if seed == e.failSeed {
		return sdk.Result{}, errors.New("engine failed")
	}
	if e.hold {
		<-ctx.Done()
		return sdk.Result{}, ctx.Err()
	}
	if err := send(sdk.Chunk{TokenIDs: []uint32{uint32(seed)}}); err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: 2, CompletionTokens: 2, CachedTokens: 1}, nil
}

func (*seedEngine) Abort(context.Context, []string) error { return nil }

func seeded(n uint32, seed int64) *workerv1.GenerateRequest {
	req := prompt(1, 2)
	req.N, req.Sampling = n, &workerv1.Sampling{Seed: proto.Int64(seed)}
	return req
}

// n choices are n engine requests, each with an id of its own and seed +
// i; their chunks carry their index, and the final message lists each
// choice with the usage summed, the prompt counted once.
func TestFanOut(t *testing.T) {
	t.Parallel()
	e := &seedEngine{failSeed: -1}
	s, c := serve(t, e, accepting(vllmAccepts...), 0)
	s.Admit(true, "")
	msgs, err := all(t.Context(), c, seeded(3, 10))
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[uint32][]uint32{}
	for _, m := range msgs[:len(msgs)-1] {
		ch := m.GetChunk()
		byIndex[ch.GetIndex()] = append(byIndex[ch.GetIndex()], ch.GetTokenIds()...)
	}
	if diff := cmp.Diff(map[uint32][]uint32{0: {10, 10}, 1: {11, 11}, 2: {12, 12}}, byIndex); diff != "" {
		t.Errorf("tokens by chunk index (-want +got):\n%s", diff)
	}
	want := &workerv1.Final{
		FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, RequestId: "r",
		Usage: &workerv1.Usage{PromptTokens: 2, CompletionTokens: 6, CachedTokens: 1},
		Choices: []*workerv1.ChoiceFinal{
			{Index: 0, FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, CompletionTokens: 2},
			{Index: 1, FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, CompletionTokens: 2},
			{Index: 2, FinishReason: workerv1.FinishReason_FINISH_REASON_STOP, CompletionTokens: 2},
		},
	}
	if diff := cmp.Diff(want, msgs[len(msgs)-1].GetFinal(), protocmp.Transform()); diff != "" {
		t.Errorf("final (-want +got):\n%s", diff)
	}
	e.mu.Lock()
	ids := slices.Sorted(slices.Values(e.ids))
	e.mu.Unlock()
	if len(slices.Compact(slices.Clone(ids))) != 3 {
		t.Errorf("engine request ids %v, want 3 distinct", ids)
	}
}

// One choice failing fails the request and ends the others' engine
// requests.
func TestFanOutChoiceFails(t *testing.T) {
	t.Parallel()
	e := &seedEngine{failSeed: 11, hold: true, ended: make(chan string, 3)}
	s, c := serve(t, e, accepting(vllmAccepts...), 0)
	s.Admit(true, "")
	msgs, err := all(t.Context(), c, seeded(3, 10))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable after the chunks", err)
	}
	if f := msgs[len(msgs)-1].GetFinal(); f.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_ERROR || f.GetUsage().GetCompletionTokens() != 3 {
		t.Errorf("final %v, want ERROR with the 3 tokens sent", f)
	}
	for range 3 {
		<-e.ended // every engine request returned
	}
}

// A client that cancels ends every choice's engine request.
func TestFanOutCancelled(t *testing.T) {
	t.Parallel()
	e := &seedEngine{failSeed: -1, hold: true, ended: make(chan string, 2)}
	s, c := serve(t, e, accepting(vllmAccepts...), 0)
	s.Admit(true, "")
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := c.Generate(ctx, seeded(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range 2 {
		<-e.ended
	}
}

// A request counts its n against --max-inflight; n above it, or above
// MaxN, is refused naming n.
func TestFanOutMaxInflight(t *testing.T) {
	t.Parallel()
	e := &seedEngine{failSeed: -1, hold: true}
	s, c := serve(t, e, accepting(vllmAccepts...), 3)
	s.Admit(true, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := c.Generate(ctx, seeded(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if r := run(t.Context(), c, seeded(2, 0)); status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("n 2 with 2 of 3 engine requests in flight: %v, want ResourceExhausted", r.err)
	}
	if r := run(t.Context(), c, seeded(4, 0)); status.Code(r.err) != codes.InvalidArgument || status.Convert(r.err).Message() != "n: 4 exceeds the most choices this worker generates for one request, 3" {
		t.Errorf("n 4 over --max-inflight 3: %v, want InvalidArgument naming n", r.err)
	}
	if got := s.Capabilities().String(); !slices.Contains(splitCaps(got), "n=3") {
		t.Errorf("capabilities %q, want n=3 (--max-inflight)", got)
	}
}

func splitCaps(s string) []string { return strings.Split(s, ",") }
