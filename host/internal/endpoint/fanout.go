package endpoint

import (
	"context"
	"errors"
	"strconv"
	"sync"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
)

// errChoiceFailed cancels the other choices of a request one of whose
// choices failed.
var errChoiceFailed = errors.New("another choice of the request failed")

// fanOut runs a request of n > 1 choices as n engine requests at once,
// each with its own engine id (the request's, then -i), seed (seed + i
// when seeded) and, with vigil's tokenizer, its own decoder and stop
// strings; their chunks go onto the one stream with Chunk.index, and one
// final message lists every choice. A choice that fails fails the
// request: the others are cancelled, so their engine requests end.
func (s *Server) fanOut(a admission, p plan, f *forward, e *ended) error {
	ctx, cancel := context.WithCancelCause(a.ctx)
	defer cancel(nil)
	m := &merge{f: f, results: make([]sdk.Result, p.n), sent: make([]uint32, p.n)}
	reqs := make([]sdk.GenerateRequest, p.n)
	ids := make([]string, p.n)
	for i := range reqs {
		reqs[i] = p.engine
		if i > 0 {
			reqs[i].RequestID = p.engine.RequestID + "-" + strconv.Itoa(i)
			if seed := p.engine.Seed; seed != nil {
				next := *seed + int64(i)
				reqs[i].Seed = &next
			}
		}
		ids[i] = reqs[i].RequestID
	}
	s.forwarding(a, ids...)
	var wg sync.WaitGroup
	errs := make([]error, p.n)
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.generate(ctx, a.engine, reqs[i], m.sender(uint32(i)))
			m.results[i], errs[i] = res, err
			if err != nil {
				cancel(errChoiceFailed)
			}
		}()
	}
	wg.Wait()
	if err := firstFailure(errs); err != nil {
		f.sentTokens = m.total()
		return s.failed(a, f, err, e)
	}
	return m.finish(e)
}

// firstFailure is the error of the choice that failed first, not one of
// those cancelled after it; nil when none failed.
func firstFailure(errs []error) error {
	var cancelled error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled):
			cancelled = err
		default:
			return err
		}
	}
	return cancelled
}

// merge is the one stream the choices of a request share.
type merge struct {
	f       *forward
	mu      sync.Mutex // held for each Send: a stream takes one at a time
	results []sdk.Result
	sent    []uint32 // output tokens sent, per choice
}

// sender is choice i's send function.
func (m *merge) sender(i uint32) func(sdk.Chunk) error {
	return func(c sdk.Chunk) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.sent[i] += uint32(len(c.TokenIDs))
		return m.f.emit(i, c)
	}
}

// total is the output tokens sent over every choice.
func (m *merge) total() uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint32
	for _, s := range m.sent {
		n += s
	}
	return n
}

// finish sends the final message of choices that all ended: choice 0's
// finish reason, the usage summed (the prompt and its cached tokens
// counted once) and each choice's end.
func (m *merge) finish(e *ended) error {
	if err := m.f.flushPrompt(); err != nil {
		return err
	}
	if err := m.f.flushParsers(e); err != nil {
		return err
	}
	r0 := m.results[0]
	fin := &workerv1.Final{
		FinishReason: m.f.parse.finishReason(0, finishToProto(r0.FinishReason)),
		Usage:        &workerv1.Usage{PromptTokens: r0.PromptTokens, CachedTokens: r0.CachedTokens},
		RequestId:    m.f.id,
		Choices:      make([]*workerv1.ChoiceFinal, len(m.results)),
	}
	for i, r := range m.results {
		fin.Usage.CompletionTokens += r.CompletionTokens
		fin.Choices[i] = &workerv1.ChoiceFinal{Index: uint32(i), FinishReason: m.f.parse.finishReason(uint32(i), finishToProto(r.FinishReason)), CompletionTokens: r.CompletionTokens}
	}
	e.outcome, e.prompt, e.completion = OutcomeOK, fin.Usage.PromptTokens, fin.Usage.CompletionTokens
	return m.f.stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: fin}})
}
