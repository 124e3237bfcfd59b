package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
)

// maxMailbox bounds the output waiting for one request on the host side
// of a Multiplex stream, in maxMerged's units. The stream's receiver
// never waits for one request's client (that would stall every other
// request on the stream), so a request whose client falls this far behind
// fails with errMailboxFull and is cancelled: memory stays bounded at
// maxMailbox per request in flight, and no merged chunk nears gRPC's
// 4 MiB default limit on a message.
const maxMailbox = 16 * maxMerged

// errMailboxFull ends a request whose client fell maxMailbox behind.
var errMailboxFull = fmt.Errorf("the client fell %d KiB of output behind the engine: request cancelled", maxMailbox>>10)

// muxClient opens the host's Multiplex stream lazily, on the first
// Generate, and again after it ended.
type muxClient struct {
	mu  sync.Mutex
	cur *muxStream
}

// muxStream is the host side of one Multiplex stream: one goroutine
// receives its batches and hands each item to its request's mailbox.
type muxStream struct {
	c      *engineClient
	stream pluginv1.Engine_MultiplexClient
	cancel context.CancelFunc

	sendMu sync.Mutex // Send is not safe from many goroutines

	mu     sync.Mutex
	calls  map[uint64]*muxCall
	nextID uint64
	ended  bool
}

// muxCall is one Generate on a Multiplex stream. Whoever removes it from
// its stream's calls (the receiver with its end, or Generate giving up)
// sets res and err, then closes q.
type muxCall struct {
	ctx context.Context
	id  uint64
	q   *chunkQueue
	res Result
	err error
}

// register returns the open Multiplex stream with call registered on it,
// opening one when none is open.
func (mc *muxClient) register(c *engineClient, call *muxCall) (*muxStream, error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for {
		s := mc.cur
		if s == nil {
			// Not the request's context: the stream outlives it.
			ctx, cancel := context.WithCancel(context.Background())
			stream, err := c.client.Multiplex(ctx)
			if err != nil {
				cancel()
				return nil, err
			}
			s = &muxStream{c: c, stream: stream, cancel: cancel, calls: make(map[uint64]*muxCall)}
			mc.cur = s
			go s.receive(mc)
		}
		s.mu.Lock()
		if s.ended {
			s.mu.Unlock()
			mc.cur = nil
			continue
		}
		s.nextID++
		call.id = s.nextID
		s.calls[call.id] = call
		s.mu.Unlock()
		return s, nil
	}
}

// generateMux is Generate over the Multiplex stream: the chunks that
// arrive while send runs go to the next send as one, merged in order.
func (c *engineClient) generateMux(ctx context.Context, req GenerateRequest, p *pluginv1.GenerateRequest, send func(Chunk) error) (Result, error) {
	if err := ContextErr(ctx); err != nil {
		return Result{}, err
	}
	call := &muxCall{ctx: ctx, q: newChunkQueue(true)}
	s, err := c.mux.register(c, call)
	if err != nil {
		return Result{}, c.ctxErr(ctx, err)
	}
	s.sendMu.Lock()
	err = s.stream.Send(&pluginv1.MultiplexRequest{Kind: &pluginv1.MultiplexRequest_Start{Start: &pluginv1.MultiplexStart{Id: call.id, Request: p}}})
	s.sendMu.Unlock()
	// A failed Send means the stream ended; its receiver fails the call
	// with the stream's status.
	_ = err
	stop := context.AfterFunc(ctx, func() {
		s.end(call, Result{}, ctx.Err(), true)
	})
	defer stop()
	for {
		ch, ok := call.q.take()
		if !ok {
			break
		}
		// ctx.Err, not ContextErr: a passed deadline fires ctx's timer,
		// which ends the call; and Deadline walks the context's chain of
		// values, a cost per token.
		if cerr := ctx.Err(); cerr != nil {
			// Ended: what waits is dropped, so no result either.
			s.end(call, Result{}, cerr, true)
			return Result{}, cerr
		}
		if err := send(ch); err != nil {
			s.end(call, Result{}, err, true)
			return Result{}, err
		}
	}
	return call.res, call.err
}

// end ends call with res and err unless it has ended, sending the adapter
// a cancel frame when cancel is set.
func (s *muxStream) end(call *muxCall, res Result, err error, cancel bool) {
	s.mu.Lock()
	if s.calls[call.id] != call {
		s.mu.Unlock()
		return
	}
	delete(s.calls, call.id)
	ended := s.ended
	s.mu.Unlock()
	call.res, call.err = res, err
	call.q.close()
	if cancel && !ended {
		s.sendMu.Lock()
		// An error means the stream ended, which cancels every request.
		_ = s.stream.Send(&pluginv1.MultiplexRequest{Kind: &pluginv1.MultiplexRequest_Cancel{Cancel: call.id}})
		s.sendMu.Unlock()
	}
}

// receive reads batches until the stream fails, then fails every call in
// flight with the stream's error, as each call's own Generate stream
// would have failed.
func (s *muxStream) receive(mc *muxClient) {
	defer s.cancel()
	var b muxBatch
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			s.fail(mc, err)
			return
		}
		s.mu.Lock()
		for _, it := range msg.GetItems() {
			if call := s.calls[it.GetId()]; call != nil { // else ended here already
				s.deliver(&b, call, it)
			}
		}
		s.mu.Unlock()
		for _, e := range b.ends {
			e.call.res, e.call.err = e.res, e.err
			e.call.q.close()
		}
		for _, call := range b.full {
			s.sendMu.Lock()
			_ = s.stream.Send(&pluginv1.MultiplexRequest{Kind: &pluginv1.MultiplexRequest_Cancel{Cancel: call.id}})
			s.sendMu.Unlock()
		}
		clear(b.ends)
		b.ends, b.full = b.ends[:0], b.full[:0]
	}
}

// muxBatch is what one received batch ended: the calls, each with its
// result or error, to end once s.mu is released, and those of them whose
// client fell too far behind, which the adapter is told to cancel.
type muxBatch struct {
	ends []muxEnding
	full []*muxCall
}

type muxEnding struct {
	call *muxCall
	res  Result
	err  error
}

// deliver hands item it to call, which it removes from the stream's calls
// when it is call's end; s.mu is held.
func (s *muxStream) deliver(b *muxBatch, call *muxCall, it *pluginv1.MultiplexItem) {
	switch k := it.GetKind().(type) {
	case *pluginv1.MultiplexItem_Chunk, *pluginv1.MultiplexItem_Prompt:
		c := Chunk{PromptLogprobs: promptLogprobsFromProto(it.GetPrompt())}
		if ch := it.GetChunk(); ch != nil {
			c = Chunk{TokenIDs: ch.GetTokenIds(), Text: ch.GetText(), Logprobs: tokenLogprobsFromProto(ch.GetLogprobs())}
		}
		if !call.q.offer(c, maxMailbox) {
			delete(s.calls, call.id)
			b.ends = append(b.ends, muxEnding{call, Result{}, errMailboxFull})
			b.full = append(b.full, call)
		}
	case *pluginv1.MultiplexItem_Final:
		delete(s.calls, call.id)
		b.ends = append(b.ends, muxEnding{call, resultFromProto(k.Final), nil})
	case *pluginv1.MultiplexItem_Error:
		delete(s.calls, call.id)
		st := status.FromProto(&spb.Status{Code: k.Error.GetCode(), Message: k.Error.GetMessage(), Details: k.Error.GetDetails()})
		b.ends = append(b.ends, muxEnding{call, Result{}, s.c.ctxErr(call.ctx, st.Err())})
	}
}

// fail ends the stream after its receive failed with err: every call in
// flight fails with one error, which says so when the adapter died
// (errAfterExit waits a moment to see the exit).
func (s *muxStream) fail(mc *muxClient, err error) {
	s.mu.Lock()
	s.ended = true
	calls := s.calls
	s.calls = nil
	s.mu.Unlock()
	mc.mu.Lock()
	if mc.cur == s {
		mc.cur = nil
	}
	mc.mu.Unlock()
	var fail error
	if errors.Is(err, io.EOF) {
		fail = fmt.Errorf("%w: adapter ended the stream without a final message", ErrUnavailable)
	} else if len(calls) > 0 {
		fail = s.c.errAfterExit(err)
	}
	for _, call := range calls {
		call.err = fail
		if cerr := ContextErr(call.ctx); cerr != nil {
			call.err = &classError{cerr, fail.Error()}
		}
		call.q.close()
	}
}
