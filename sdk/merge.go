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
	waiting bool // ids or texts hold output not yet taken
	ids     []uint32
	texts   []string
	size    int
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
		if q.size < maxMerged {
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
	if len(c.TokenIDs) == 0 && c.Text == "" {
		q.mu.Unlock()
		return nil
	}
	wake := !q.waiting
	q.add(c)
	q.waiting = true
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
	if len(c.TokenIDs) == 0 && c.Text == "" {
		return true
	}
	q.mu.Lock()
	if q.closed || q.err != nil {
		q.mu.Unlock()
		return true
	}
	if q.size >= limit {
		q.mu.Unlock()
		return false
	}
	q.add(c)
	wake := !q.waiting
	q.waiting = true
	q.mu.Unlock()
	if wake {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// add appends c to the output waiting; q.mu is held.
func (q *chunkQueue) add(c Chunk) {
	if q.owned && len(q.ids) == 0 {
		q.ids = c.TokenIDs
	} else {
		q.ids = append(q.ids, c.TokenIDs...)
	}
	if c.Text != "" {
		q.texts = append(q.texts, c.Text)
	}
	q.size += len(c.Text) + 4*len(c.TokenIDs)
}

// take waits for output and returns all of it as one chunk; false once
// the queue is closed and empty.
func (q *chunkQueue) take() (Chunk, bool) {
	for {
		q.mu.Lock()
		if q.waiting {
			c := Chunk{TokenIDs: q.ids}
			if len(q.texts) == 1 {
				c.Text = q.texts[0]
			} else {
				c.Text = strings.Join(q.texts, "")
			}
			clear(q.texts)
			q.texts = q.texts[:0]
			q.ids = nil
			full := q.size >= maxMerged
			q.size, q.waiting = 0, false
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
