// Package logwriter provides Writer, which keeps vigil's log output from
// holding up or ending vigil: an output that stalls (a pipe whose reader
// stopped reading, a suspended terminal) or breaks (a pipe whose reader
// died: EPIPE) must never stop a withdrawal, a drain or an exit code.
//
// Log calls are synchronous (hclog writes each entry to its output under a
// lock), so one stalled write would stall every goroutine that logs, the
// lifecycle's included. Writer takes each entry into a queue bounded in
// bytes and writes it to the output from a goroutine of its own: a Write
// never blocks on the output and never fails. An entry that finds the queue
// full is dropped and counted, and the count is written, as an entry of its
// own, where the entries went missing: once the queue has room again, or at
// Close.
//
// No library: hclog has no asynchronous output; the non-blocking writers
// there are (zerolog's diode, go-diodes) bound the entries queued rather
// than their bytes (vigil relays adapter lines of up to 256 KiB), drop the
// oldest entries without saying where, and poll; none gives up on a stalled
// output at exit, which vigil needs to keep its exit code.
package logwriter

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxQueued is the most bytes of entries waiting for the output: a
// lifecycle event logs a few lines of a few hundred bytes, so 1 MiB only
// fills once the output has stopped taking writes, and bounds what such an
// output costs.
const DefaultMaxQueued = 1 << 20

// Writer writes each Write's bytes, one log entry, to an output from a
// goroutine of its own, in order. Its methods are safe for concurrent use.
type Writer struct {
	out io.Writer
	max int

	written atomic.Int64  // entries the output has taken, or refused
	done    chan struct{} // closed when the goroutine has written all after Close

	mu      sync.Mutex
	ready   *sync.Cond // signalled when the queue grows or Close is called
	queue   [][]byte
	queued  int // bytes in queue
	dropped int // entries dropped since the last notice was queued
	closed  bool
	notice  func(dropped int) []byte
}

// New returns a Writer onto out, queueing at most maxQueued bytes of
// entries (one entry more when the queue is empty, whatever its length).
// Close it.
func New(out io.Writer, maxQueued int) *Writer {
	w := &Writer{out: out, max: maxQueued, done: make(chan struct{}), notice: plainNotice}
	w.ready = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// plainNotice is the notice of dropped entries until SetNotice sets one in
// the log's format.
func plainNotice(dropped int) []byte {
	return fmt.Appendf(nil, "vigil: %d log entries dropped: the log output was not taking them\n", dropped)
}

// SetNotice sets how the count of dropped entries is written: f returns
// one entry in the log's format.
func (w *Writer) SetNotice(f func(dropped int) []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notice = f
}

// Write queues a copy of p, one log entry, and returns len(p), nil: when
// the queue is full or the Writer closed it drops the entry and counts it.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.queue) > 0 && w.queued+len(p) > w.max {
		w.dropped++
		return len(p), nil
	}
	w.queueNotice()
	w.push(append([]byte(nil), p...))
	return len(p), nil
}

// queueNotice queues the count of the entries dropped since the last one,
// if any: it goes where they went missing.
func (w *Writer) queueNotice() {
	if w.dropped > 0 {
		w.push(w.notice(w.dropped))
		w.dropped = 0
	}
}

func (w *Writer) push(entry []byte) {
	w.queue = append(w.queue, entry)
	w.queued += len(entry)
	w.ready.Signal()
}

// run writes the queue's entries to the output, one at a time, until the
// Writer is closed and the queue empty. A write error (EPIPE from a reader
// that died) loses that entry alone.
func (w *Writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.ready.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		entry := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.queued -= len(entry)
		w.mu.Unlock()
		_, _ = w.out.Write(entry)
		w.written.Add(1)
	}
}

// Close stops taking entries and waits until those queued, and the count
// of any dropped, are written, giving up when the output takes no entry
// for stall: an output that stalls must not keep vigil from exiting with
// its code. It is idempotent.
func (w *Writer) Close(stall time.Duration) {
	w.mu.Lock()
	if !w.closed {
		w.queueNotice()
		w.closed = true
		w.ready.Signal()
	}
	w.mu.Unlock()
	t := time.NewTicker(stall)
	defer t.Stop()
	last := w.written.Load()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			n := w.written.Load()
			if n == last {
				return
			}
			last = n
		}
	}
}
