// Package load drives concurrent streaming requests for a bounded time and
// count, and measures what came back: tokens, time to first token,
// requests and errors.
package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what one request delivered.
type Outcome struct {
	// First is when the first token arrived; zero when none did.
	First time.Time
	// Tokens is the number of output tokens received.
	Tokens int
	// Err is the request's failure, nil when it completed.
	Err error
	// Paths are the chunks' paths, from the Stamped requests only.
	Paths []Path
}

// Request sends one request with the given id and reads its stream to the
// end.
type Request func(ctx context.Context, id string) Outcome

// Config bounds a run: every stream sends requests back to back until
// Duration has passed, ctx ends or MaxRequests have been sent in all.
type Config struct {
	Streams  int
	Duration time.Duration
	// MaxRequests bounds the run in count as well as in time.
	MaxRequests int64
	// RequestTimeout bounds each request.
	RequestTimeout time.Duration
	// IDPrefix starts every request id; the request's sequence number
	// (from 0, unique in the run) follows it.
	IDPrefix string
	// RecordSends keeps every request's send time, indexed by sequence
	// number, in Result.Sends.
	RecordSends bool
	// Ramp staggers the streams' first requests evenly over this long
	// (stream i starts i*Ramp/Streams after the run), as load reaches an
	// engine from many clients; 0 starts them all at once.
	Ramp time.Duration
	// Warmup, when above 0, makes the run measure a window: from Warmup
	// after the start to Duration. Result then counts the tokens that
	// arrived inside it, over its length, and the TTFT of requests sent
	// inside it; requests streaming at Duration finish uncounted.
	Warmup time.Duration
	// Mark, when set with Warmup, is called as the window opens and as it
	// closes, so that the caller reads CPU times over the same window.
	Mark func()
}

// Result is what a run measured.
type Result struct {
	Requests, Errors, Tokens int64
	// Elapsed runs from the start to the end of the last request, so that
	// requests still streaming at Duration count in full; with
	// Config.Warmup, it is the measuring window's length and Tokens the
	// tokens inside it.
	Elapsed time.Duration
	// TTFT holds each request's time from send to first token.
	TTFT []time.Duration
	// Sends holds each request's send time by sequence number, when
	// Config.RecordSends.
	Sends []time.Time
	// Start is when the run began, the origin of Config.Ramp's offsets.
	Start time.Time
	// FirstErr is the first failure seen, for the report.
	FirstErr error
	// Paths are all the chunks' paths, from the Stamped requests only.
	Paths []Path
}

// TokensPerSecond is the token throughput over Elapsed.
func (r Result) TokensPerSecond() float64 { return perSecond(r.Tokens, r.Elapsed) }

// RequestsPerSecond is the completed-request throughput over Elapsed.
func (r Result) RequestsPerSecond() float64 { return perSecond(r.Requests-r.Errors, r.Elapsed) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// sent is one request's record inside a stream.
type sent struct {
	seq  int64
	at   time.Time
	ttft time.Duration // 0: no token arrived
}

// streamResult is one stream's share of a Result, merged at the end so
// that streams never contend on a lock while measuring.
type streamResult struct {
	sent           []sent
	errors, tokens int64
	firstErr       error
	paths          []Path
}

// Run runs cfg.Streams streams of back-to-back requests and waits for all
// of them to end.
func Run(ctx context.Context, cfg Config, req Request) Result {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var seq atomic.Int64
	results := make([]streamResult, cfg.Streams)
	var counters []counter
	if cfg.Warmup > 0 {
		counters = make([]counter, cfg.Streams)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx := ctx
			if counters != nil {
				sctx = context.WithValue(ctx, counterKey{}, &counters[i].n)
			}
			if cfg.Ramp > 0 && i > 0 {
				// Load shaping, not synchronisation: this stream's
				// first request is due then.
				t := time.NewTimer(cfg.Ramp * time.Duration(i) / time.Duration(cfg.Streams))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
			results[i] = stream(sctx, cfg, &seq, req)
		}()
	}
	var w window
	if counters != nil {
		w = measure(ctx, start.Add(cfg.Warmup), counters, cfg.Mark)
	}
	wg.Wait()
	out := merge(results, time.Since(start), cfg.RecordSends, w)
	out.Start = start
	return out
}

// counter is one stream's tokens received, on a cache line of its own.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

type counterKey struct{}

// window is the measuring window of a run with Config.Warmup.
type window struct {
	open, close time.Time
	tokens      int64
}

// measure waits until open, then until ctx ends, reading the streams'
// token counters at both.
func measure(ctx context.Context, open time.Time, counters []counter, mark func()) window {
	sum := func() int64 {
		var n int64
		for i := range counters {
			n += counters[i].n.Load()
		}
		return n
	}
	t := time.NewTimer(time.Until(open))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	// The window opens before mark is told, so that what the caller does
	// once told (its CPU read, the test's tokens) falls inside it.
	w := window{open: time.Now(), tokens: -sum()}
	if mark != nil {
		mark()
	}
	<-ctx.Done()
	w.tokens += sum()
	w.close = time.Now()
	if mark != nil {
		mark()
	}
	return w
}

// stream sends requests until the run's context ends or the count bound is
// reached. Requests run on a context of their own, bounded by
// RequestTimeout, so that the one in flight at the end finishes.
func stream(ctx context.Context, cfg Config, seq *atomic.Int64, req Request) streamResult {
	var r streamResult
	for ctx.Err() == nil {
		n := seq.Add(1) - 1
		if n >= cfg.MaxRequests {
			break
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.RequestTimeout)
		at := time.Now()
		out := req(rctx, fmt.Sprintf("%s%d", cfg.IDPrefix, n))
		cancel()
		s := sent{seq: n, at: at}
		if !out.First.IsZero() {
			s.ttft = out.First.Sub(at)
		}
		r.sent = append(r.sent, s)
		r.tokens += int64(out.Tokens)
		r.paths = append(r.paths, out.Paths...)
		if out.Err != nil {
			r.errors++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("request %s%d: %w", cfg.IDPrefix, n, out.Err)
			}
		}
	}
	return r
}

func merge(results []streamResult, elapsed time.Duration, sends bool, w window) Result {
	out := Result{Elapsed: elapsed}
	windowed := !w.open.IsZero()
	for _, r := range results {
		out.Requests += int64(len(r.sent))
		out.Errors += r.errors
		out.Tokens += r.tokens
		if out.FirstErr == nil {
			out.FirstErr = r.firstErr
		}
		out.Paths = append(out.Paths, r.paths...)
		for _, s := range r.sent {
			if s.ttft > 0 && (!windowed || !s.at.Before(w.open) && s.at.Before(w.close)) {
				out.TTFT = append(out.TTFT, s.ttft)
			}
		}
	}
	if windowed {
		out.Tokens, out.Elapsed = w.tokens, w.close.Sub(w.open)
	}
	if sends {
		out.Sends = make([]time.Time, out.Requests)
		for _, r := range results {
			for _, s := range r.sent {
				out.Sends[s.seq] = s.at
			}
		}
	}
	return out
}
