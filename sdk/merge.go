package sdk

import (
	"context"
	"strings"
	"sync"
)

// maxMerged bounds the output waiting in a chunkQueue, in bytes of text
// plus 4 per token id: a producer this far ahead of a slow next hop waits
// for it, so memory stays bounded and no merged message nears gRPC's
// 4 MiB default limit on a received message.
const maxMerged = 64 << 10

// chunkQueue hands a generation's chunks from the goroutine that produces
// them to the one that sends them to the next hop, merging the chunks
// that wait while the sender is busy: take returns everything waiting as
// one chunk (token ids and text concatenated, in order) and never waits
// for more, so a chunk put while the sender is idle goes out at once. One
// producer, one consumer.
type chunkQueue struct {
	// owned: put's token id slices are the queue's to keep and extend (the
	// host's, fresh from unmarshalling). Otherwise put copies them, since
	// an adapter may reuse its slice once send returns. Taken slices are
	// never reused: gRPC does not allow changing a message after its send.
	owned bool

	mu      sync.Mutex
	out     pending
	closed  bool          // the producer is done
	err     error         // the consumer stopped with err
	ready   chan struct{} // cap 1: output waits, or closed
	room    chan struct{} // cap 1: take emptied the queue
	stopped chan struct{} // closed with err set
}

func newChunkQueue(owned bool) *chunkQueue {
	return &chunkQueue{
		owned:   owned,
		ready:   make(chan struct{}, 1),
		room:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
}

// errQueueClosed is put's answer after close.
var errQueueClosed = errSendAfterReturn

// put adds c to the output waiting. It waits only while maxMerged is
// waiting, until take makes room, the consumer stops (then it returns the
// consumer's error) or ctx ends (ctx's error). After close it returns
// errQueueClosed.
func (q *chunkQueue) put(ctx context.Context, c Chunk) error {
	for {
		q.mu.Lock()
		switch {
		case q.err != nil:
			q.mu.Unlock()
			return q.err
		case q.closed:
			q.mu.Unlock()
			return errQueueClosed
		}
		if q.out.size < maxMerged {
			break
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-q.stopped:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.empty() {
		q.mu.Unlock()
		return nil
	}
	wake := !q.out.waiting
	q.out.add(c, q.owned)
	q.mu.Unlock()
	if wake {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return nil
}

// offer is put for a producer that must never wait (the receiver of a
// Multiplex stream, shared by many requests): it adds c unless limit
// bytes already wait, and reports whether it did. After close it drops c.
func (q *chunkQueue) offer(c Chunk, limit int) bool {
	if c.empty() {
		return true
	}
	q.mu.Lock()
	if q.closed || q.err != nil {
		q.mu.Unlock()
		return true
	}
	if q.out.size >= limit {
		q.mu.Unlock()
		return false
	}
	wake := !q.out.waiting
	q.out.add(c, q.owned)
	q.mu.Unlock()
	if wake {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// take waits for output and returns all of it as one chunk; false once
// the queue is closed and empty.
func (q *chunkQueue) take() (Chunk, bool) {
	for {
		q.mu.Lock()
		if q.out.waiting {
			full := q.out.size >= maxMerged
			c := q.out.take()
			q.mu.Unlock()
			if full {
				select {
				case q.room <- struct{}{}:
				default:
				}
			}
			return c, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return Chunk{}, false
		}
		<-q.ready
	}
}

// close says the producer is done: take returns what waits, then false.
func (q *chunkQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// fail says the consumer stopped with err: put returns err from now on.
func (q *chunkQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		close(q.stopped)
	}
}

// pending is a generation's output waiting for the next hop, merged.
type pending struct {
	waiting bool // output not yet taken
	ids     []uint32
	texts   []string
	lps     []TokenLogprob
	prompt  []TokenLogprob
	size    int
}

// empty: c carries nothing to send.
func (c Chunk) empty() bool {
	return len(c.TokenIDs) == 0 && c.Text == "" && len(c.Logprobs) == 0 && c.PromptLogprobs == nil
}

// add appends c. With owned, c's slices are the queue's to keep and
// extend; otherwise they are copied, as an adapter may reuse them.
func (p *pending) add(c Chunk, owned bool) {
	if owned && len(p.ids) == 0 {
		p.ids = c.TokenIDs
	} else {
		p.ids = append(p.ids, c.TokenIDs...)
	}
	if c.Text != "" {
		p.texts = append(p.texts, c.Text)
	}
	switch {
	case owned && len(p.lps) == 0:
		p.lps = c.Logprobs
	case owned:
		p.lps = append(p.lps, c.Logprobs...)
	default:
		p.lps = appendCopies(p.lps, c.Logprobs)
	}
	if c.PromptLogprobs != nil {
		if p.prompt == nil { // non-nil even when empty: the prompt came
			p.prompt = make([]TokenLogprob, 0, len(c.PromptLogprobs))
		}
		p.prompt = appendCopies(p.prompt, c.PromptLogprobs)
	}
	p.size += len(c.Text) + 4*len(c.TokenIDs) + logprobsSize(c.Logprobs) + logprobsSize(c.PromptLogprobs)
	p.waiting = true
}

// take returns what waits as one chunk and empties p. Taken slices are
// never reused: gRPC does not allow changing a message after its send.
func (p *pending) take() Chunk {
	c := Chunk{TokenIDs: p.ids, Logprobs: p.lps, PromptLogprobs: p.prompt}
	if len(p.texts) == 1 {
		c.Text = p.texts[0]
	} else {
		c.Text = strings.Join(p.texts, "")
	}
	clear(p.texts)
	p.ids, p.texts, p.lps, p.prompt = nil, p.texts[:0], nil, nil
	p.size, p.waiting = 0, false
	return c
}

// appendCopies appends ls to dst with their Top lists copied: an adapter
// may reuse its slices once send returns.
func appendCopies(dst, ls []TokenLogprob) []TokenLogprob {
	for _, l := range ls {
		l.Top = append([]Logprob(nil), l.Top...)
		dst = append(dst, l)
	}
	return dst
}
