package mock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/plugins/vllm/vllmpb"
)

// defaultMaxNewTokens is vLLM's default when StoppingCriteria.max_new_tokens is 0.
const defaultMaxNewTokens = 20

// OutputToken is output token i (from 0) for a prompt and sampling seed
// (0 when unset): (seed + sum(prompt)*31 + i*7919) % 32000 + 100, in uint32
// arithmetic. A text prompt is one token per UTF-8 byte, the byte's value.
func OutputToken(seed int64, prompt []uint32, i int) uint32 {
	return outputToken(uint32(seed), sum(prompt), uint32(i))
}

func outputToken(seed, promptSum, i uint32) uint32 {
	return (seed+promptSum*31+i*7919)%32000 + 100
}

// TokenText is the text the mock engine produces for a token.
func TokenText(id uint32) string { return fmt.Sprintf(" t%d", id) }

func sum(ids []uint32) uint32 {
	var s uint32
	for _, id := range ids {
		s += id
	}
	return s
}

func promptTokens(req *vllmpb.GenerateRequest) []uint32 {
	if _, ok := req.GetPrompt().(*vllmpb.GenerateRequest_Text); ok {
		text := req.GetText()
		ids := make([]uint32, len(text))
		for i := range len(text) {
			ids[i] = uint32(text[i])
		}
		return ids
	}
	return req.GetTokenIds().GetIds()
}

// stream is one generation in flight.
type stream struct {
	id        string
	aborted   chan struct{}
	abortOnce sync.Once
	hold      *hold // taken when the stream starts
	fail      *fail
}

func (s *stream) abort() { s.abortOnce.Do(func() { close(s.aborted) }) }

// hold stops streams before output token at until release is closed.
type hold struct {
	at      uint32
	release chan struct{}
}

// fail ends one stream with code before output token at.
type fail struct {
	at   uint32
	code codes.Code
}

var errAborted = errors.New("request aborted")

type inferenceServer struct {
	vllmpb.UnimplementedInferenceServer
	e *Engine
}

// GenerateStream sends prompt_info with the first message and finish_info
// with the last; an aborted request ends with a finish_reason ABORTED message.
func (s *inferenceServer) GenerateStream(req *vllmpb.GenerateRequest, out grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	return s.e.generate(out.Context(), req, out.Send)
}

// Generate collects what GenerateStream would send into one response.
func (s *inferenceServer) Generate(ctx context.Context, req *vllmpb.GenerateRequest) (*vllmpb.GenerateResponse, error) {
	resp := &vllmpb.GenerateResponse{Outputs: &vllmpb.SequenceOutput{}}
	err := s.e.generate(ctx, req, func(m *vllmpb.GenerateResponse) error {
		if m.PromptInfo != nil {
			resp.PromptInfo = m.PromptInfo
		}
		o := resp.Outputs
		o.Text += m.Outputs.GetText()
		o.NumTokens += m.Outputs.GetNumTokens()
		o.TokenIds = append(o.TokenIds, m.Outputs.GetTokenIds()...)
		o.FinishInfo = m.Outputs.GetFinishInfo()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// begin counts the request and registers it in flight if the engine can serve it.
func (e *Engine) begin(req *vllmpb.GenerateRequest) (*stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests[req.GetRequestId()]++
	e.reqTotal++
	if n := req.GetSampling().GetNumSequences(); n > 1 {
		return nil, status.Errorf(codes.InvalidArgument, "sampling.num_sequences: the mock engine generates one sequence, got %d", n)
	}
	if err := e.unavailableLocked(true); err != nil {
		return nil, err
	}
	st := &stream{id: req.GetRequestId(), aborted: make(chan struct{}), hold: e.hold, fail: e.fail}
	e.fail = nil // one stream only
	e.streams[st] = struct{}{}
	return st, nil
}

func (e *Engine) end(st *stream) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.streams, st)
}

func (e *Engine) generate(ctx context.Context, req *vllmpb.GenerateRequest, send func(*vllmpb.GenerateResponse) error) error {
	st, err := e.begin(req)
	if err != nil {
		return err
	}
	defer e.end(st)

	prompt := promptTokens(req)
	r := &run{
		ctx:       ctx,
		st:        st,
		send:      send,
		delay:     e.cfg.TokenDelay,
		perMsg:    e.cfg.TokensPerMessage,
		numPrompt: uint32(len(prompt)),
		wantText:  true,
		wantIDs:   req.GetResponse().GetOutputTokenIds(),
	}
	if o := req.GetResponse(); o != nil && o.OutputText != nil {
		r.wantText = *o.OutputText // absent means true
	}
	err = r.loop(req, prompt)
	if errors.Is(err, errAborted) {
		return r.emit(&vllmpb.FinishInfo{
			NumOutputTokens: r.produced,
			FinishReason:    vllmpb.FinishInfo_ABORTED,
		})
	}
	return err
}

// run is the state of one generation.
type run struct {
	ctx       context.Context
	st        *stream
	send      func(*vllmpb.GenerateResponse) error
	delay     time.Duration
	perMsg    int
	numPrompt uint32
	wantText  bool
	wantIDs   bool

	sent     int    // messages sent
	produced uint32 // output tokens so far
	ids      []uint32
	text     strings.Builder
}

func (r *run) loop(req *vllmpb.GenerateRequest, prompt []uint32) error {
	stopping := req.GetStopping()
	maxNew := stopping.GetMaxNewTokens()
	if maxNew == 0 {
		maxNew = defaultMaxNewTokens
	}
	stops := make(map[uint32]bool, len(stopping.GetStopTokenIds()))
	for _, id := range stopping.GetStopTokenIds() {
		stops[id] = true
	}
	seed, promptSum := uint32(req.GetSampling().GetSeed()), sum(prompt)

	for i := uint32(0); ; i++ {
		if h := r.st.hold; h != nil && i == h.at {
			if err := r.flush(); err != nil {
				return err
			}
			if err := wait(r, h.release); err != nil {
				return err
			}
		}
		if f := r.st.fail; f != nil && i == f.at {
			if err := r.flush(); err != nil {
				return err
			}
			return status.Errorf(f.code, "mock: injected failure after %d tokens", i)
		}
		if err := r.check(); err != nil {
			return err
		}

		tok := outputToken(seed, promptSum, i)
		r.produced++
		r.ids = append(r.ids, tok)
		var fin *vllmpb.FinishInfo
		switch {
		// vLLM ignores stop tokens until min_tokens are out, and keeps the
		// stop token's id but drops its text unless asked to include it.
		case stops[tok] && i+1 >= stopping.GetMinNewTokens():
			fin = &vllmpb.FinishInfo{
				FinishReason: vllmpb.FinishInfo_STOP,
				StopReason:   &vllmpb.FinishInfo_StopTokenId{StopTokenId: tok},
			}
		case i+1 >= maxNew:
			fin = &vllmpb.FinishInfo{FinishReason: vllmpb.FinishInfo_LENGTH}
		}
		if fin == nil || fin.FinishReason != vllmpb.FinishInfo_STOP || stopping.GetIncludeStopStrings() {
			r.text.WriteString(TokenText(tok))
		}
		if fin != nil {
			fin.NumOutputTokens = r.produced
			if err := r.pause(); err != nil {
				return err
			}
			return r.emit(fin)
		}
		if len(r.ids) >= r.perMsg {
			if err := r.flush(); err != nil {
				return err
			}
		}
	}
}

// flush sends pending tokens, if any, after the delay between messages.
func (r *run) flush() error {
	if len(r.ids) == 0 {
		return nil
	}
	if err := r.pause(); err != nil {
		return err
	}
	return r.emit(nil)
}

// pause waits TokenDelay before every message but the first.
func (r *run) pause() error {
	if r.sent == 0 || r.delay <= 0 {
		return r.check()
	}
	t := time.NewTimer(r.delay)
	defer t.Stop()
	return wait(r, t.C)
}

// wait blocks until c yields, the request is aborted, or the client leaves.
func wait[T any](r *run, c <-chan T) error {
	select {
	case <-c:
		return nil
	case <-r.st.aborted:
		return errAborted
	case <-r.ctx.Done():
		return status.FromContextError(r.ctx.Err()).Err()
	}
}

// check reports an abort or a departed client without blocking.
func (r *run) check() error {
	select {
	case <-r.st.aborted:
		return errAborted
	case <-r.ctx.Done():
		return status.FromContextError(r.ctx.Err()).Err()
	default:
		return nil
	}
}

// emit sends pending tokens now, with fin on the last message.
func (r *run) emit(fin *vllmpb.FinishInfo) error {
	out := &vllmpb.SequenceOutput{NumTokens: uint32(len(r.ids)), FinishInfo: fin}
	if r.wantText {
		out.Text = r.text.String()
	}
	if r.wantIDs {
		out.TokenIds = r.ids
	}
	msg := &vllmpb.GenerateResponse{Outputs: out}
	if r.sent == 0 {
		msg.PromptInfo = &vllmpb.PromptInfo{NumPromptTokens: r.numPrompt}
	}
	r.sent++
	r.ids = nil
	r.text.Reset()
	return r.send(msg)
}
