package sdk

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/grpc/status"
)

// Multiplex serves many requests on one stream (vigil.plugin.v1
// Multiplex): each start frame runs the adapter's Generate in its own
// goroutine, and one sender goroutine sends everything the requests have
// produced meanwhile as one message, never waiting for more. In an
// engine's decode step every running request gets a token, so a step's
// tokens cross the plugin boundary in one message instead of one each.
func (s *engineServer) Multiplex(stream pluginv1.Engine_MultiplexServer) error {
	g, ok := s.impl.(Generator)
	if !ok {
		return toStatus(fmt.Errorf("%w: the adapter does not forward requests", ErrUnimplemented))
	}
	ctx, cancel := context.WithCancel(stream.Context())
	m := &muxServer{
		reqs:    make(map[uint64]*muxRequest),
		ready:   make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		m.sendLoop(stream)
	}()
	var wg sync.WaitGroup
	for {
		f, err := stream.Recv()
		if err != nil {
			break // the host closed the stream or the call ended
		}
		if id, ok := f.GetKind().(*pluginv1.MultiplexRequest_Cancel); ok {
			m.cancel(id.Cancel)
			continue
		}
		start := f.GetStart()
		if start == nil {
			continue // a frame kind newer than this sdk
		}
		r := m.add(ctx, start)
		if r == nil {
			continue // a duplicate id: the host broke the protocol
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.Generate(r.ctx, generateRequestFromProto(start.GetRequest()), r.put)
			m.finish(r, res, err)
		}()
	}
	// The stream ended: every request is cancelled, as its own Generate
	// call's would be, and the sender stops once they have returned.
	cancel()
	wg.Wait()
	m.mu.Lock()
	m.done = true
	m.mu.Unlock()
	m.wake()
	<-sent
	return nil
}

// muxServer is the adapter side of one Multiplex stream.
type muxServer struct {
	mu      sync.Mutex
	reqs    map[uint64]*muxRequest // started and not yet sent their end
	pending []*muxRequest          // requests with output or an end to send, in order
	done    bool                   // no request is left: the sender stops
	err     error                  // a send failed
	ready   chan struct{}          // cap 1: pending is not empty, or done
	stopped chan struct{}          // closed with err set
}

// muxRequest is one request of a Multiplex stream. Its output fields are
// guarded by the muxServer's mu.
type muxRequest struct {
	m      *muxServer
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	room   chan struct{} // cap 1: the sender took this request's output

	queued    bool // in m.pending
	out       pending
	returned  bool                    // Generate returned: sends are refused
	cancelled bool                    // the host cancelled: no end is sent
	end       *pluginv1.MultiplexItem // final or error, sent after the output
}

func (m *muxServer) add(ctx context.Context, start *pluginv1.MultiplexStart) *muxRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.reqs[start.GetId()]; dup {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &muxRequest{
		m: m, id: start.GetId(),
		ctx: rctx, cancel: cancel, room: make(chan struct{}, 1),
	}
	m.reqs[r.id] = r
	return r
}

func (m *muxServer) cancel(id uint64) {
	m.mu.Lock()
	r := m.reqs[id]
	m.mu.Unlock()
	if r == nil {
		return
	}
	// The context first: a send refused for the cancel finds it ended.
	r.cancel()
	m.mu.Lock()
	r.cancelled = true
	m.mu.Unlock()
}

func (m *muxServer) wake() {
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// enqueue marks r as having something to send; m.mu is held. It reports
// whether the sender must be woken.
func (m *muxServer) enqueue(r *muxRequest) bool {
	if r.queued {
		return false
	}
	r.queued = true
	m.pending = append(m.pending, r)
	return len(m.pending) == 1
}

// put is the send function of r's Generate: it adds c to r's output
// waiting for the sender, and waits only while maxMerged of it waits.
func (r *muxRequest) put(c Chunk) error {
	m := r.m
	for {
		m.mu.Lock()
		switch {
		case m.err != nil:
			m.mu.Unlock()
			return m.err
		case r.returned:
			m.mu.Unlock()
			return errSendAfterReturn
		case r.cancelled:
			// The host cancelled the request: its Generate should stop.
			m.mu.Unlock()
			return context.Canceled
		}
		if r.out.size < maxMerged {
			break
		}
		m.mu.Unlock()
		select {
		case <-r.room:
		case <-m.stopped:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
	if c.empty() {
		m.mu.Unlock()
		return nil
	}
	// A copy: the adapter may reuse its slices once send returns.
	r.out.add(c, false)
	wake := m.enqueue(r)
	m.mu.Unlock()
	if wake {
		m.wake()
	}
	return nil
}

// finish records the end of r's Generate, sent after r's output.
func (m *muxServer) finish(r *muxRequest, res Result, err error) {
	item := &pluginv1.MultiplexItem{Id: r.id}
	if err != nil {
		st := status.Convert(toStatus(err)).Proto()
		item.Kind = &pluginv1.MultiplexItem_Error{Error: &pluginv1.Status{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}}
	} else {
		item.Kind = &pluginv1.MultiplexItem_Final{Final: resultToProto(res)}
	}
	m.mu.Lock()
	r.returned = true
	wake := false
	if r.cancelled {
		// The host no longer listens for this request.
		delete(m.reqs, r.id)
	} else {
		r.end = item
		wake = m.enqueue(r)
	}
	m.mu.Unlock()
	r.cancel()
	if wake {
		m.wake()
	}
}

// sendLoop sends the pending output of all requests, one message per
// turn, until done, or until a send fails, which fails every request's
// puts.
func (m *muxServer) sendLoop(stream pluginv1.Engine_MultiplexServer) {
	var out muxOut
	for {
		m.mu.Lock()
		if len(m.pending) == 0 {
			done := m.done
			m.mu.Unlock()
			if done {
				return
			}
			<-m.ready
			// Let requests already runnable (woken by the same engine
			// step) add their output first: a yield, not a wait.
			runtime.Gosched()
			continue
		}
		out.batch = append(out.batch[:0], m.pending...)
		clear(m.pending)
		m.pending = m.pending[:0]
		out.msg.Items = out.msg.Items[:0]
		out.used = 0
		for _, r := range out.batch {
			m.take(&out, r)
		}
		m.mu.Unlock()
		if err := stream.Send(&out.msg); err != nil {
			m.mu.Lock()
			if m.err == nil {
				m.err = err
				close(m.stopped)
			}
			m.mu.Unlock()
			// The stream is broken: stop every request, then wait for the
			// receive loop to see the end and return.
			m.cancelAll()
			return
		}
	}
}

// muxOut is the sender's message and its items, refilled for each send:
// Send marshals it before it returns. Token id slices are never reused.
type muxOut struct {
	msg   pluginv1.MultiplexResponse
	slots []*pluginv1.MultiplexItem
	used  int // slots used in msg
	batch []*muxRequest
}

// chunk adds c as request id's chunk item, in a slot of an earlier send.
func (out *muxOut) chunk(id uint64, c Chunk) {
	if len(out.slots) == out.used {
		out.slots = append(out.slots, &pluginv1.MultiplexItem{Kind: &pluginv1.MultiplexItem_Chunk{Chunk: &pluginv1.Chunk{}}})
	}
	it := out.slots[out.used]
	out.used++
	it.Id = id
	ch := it.GetChunk()
	ch.TokenIds, ch.Text, ch.Logprobs = c.TokenIDs, c.Text, tokenLogprobsToProto(c.Logprobs)
	out.msg.Items = append(out.msg.Items, it)
}

// take moves r's waiting output, and its end once it has one, into out's
// message; m.mu is held.
func (m *muxServer) take(out *muxOut, r *muxRequest) {
	r.queued = false
	if r.out.waiting {
		full := r.out.size >= maxMerged
		c := r.out.take()
		if c.PromptLogprobs != nil {
			out.msg.Items = append(out.msg.Items, &pluginv1.MultiplexItem{Id: r.id,
				Kind: &pluginv1.MultiplexItem_Prompt{Prompt: &pluginv1.PromptInfo{Logprobs: tokenLogprobsToProto(c.PromptLogprobs)}}})
		}
		if len(c.TokenIDs) > 0 || c.Text != "" || len(c.Logprobs) > 0 {
			out.chunk(r.id, c)
		}
		if full {
			select {
			case r.room <- struct{}{}:
			default:
			}
		}
	}
	if r.end != nil {
		out.msg.Items = append(out.msg.Items, r.end)
		r.end = nil
		delete(m.reqs, r.id)
	}
}

func (m *muxServer) cancelAll() {
	m.mu.Lock()
	reqs := make([]*muxRequest, 0, len(m.reqs))
	for _, r := range m.reqs {
		reqs = append(reqs, r)
	}
	m.mu.Unlock()
	for _, r := range reqs {
		r.cancel()
	}
}
