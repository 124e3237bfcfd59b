package enginemock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// OutputToken is output token i (from 0) for a prompt and sampling seed
// (0 when unset): (seed + sum(prompt)*31 + i*7919) % 32000 + 100, in uint32
// arithmetic. Every mock engine generates these, so tests and benchmarks
// can predict each token.
func OutputToken(seed int64, prompt []uint32, i int) uint32 {
	return outputToken(uint32(seed), sum(prompt), uint32(i))
}

func outputToken(seed, promptSum, i uint32) uint32 {
	return (seed+promptSum*31+i*7919)%32000 + 100
}

// TokenText is the text a mock engine produces for a token: " t" and its id.
func TokenText(id uint32) string { return fmt.Sprintf(" t%d", id) }

// stampMask keeps a stamp's low 31 bits, so that it fits every engine's
// token id type (SGLang's are int32).
const stampMask = 1<<31 - 1

// stampToken is the token id a mock engine sends in place of each output
// token when stamping (see envStampTokens): the send time t in Unix
// nanoseconds (wall clock), modulo 2^31 (a cycle of about 2.1 s). The
// engines' wire has no field for a send time, so the token carries it.
func stampToken(t time.Time) uint32 { return uint32(t.UnixNano() & stampMask) }

func sum(ids []uint32) uint32 {
	var s uint32
	for _, id := range ids {
		s += id
	}
	return s
}

// Request is one generation, turned from an engine's wire request.
type Request struct {
	// ID is the request id, counted in State.Requests and matched by Abort.
	ID string
	// Prompt is the prompt's token ids.
	Prompt []uint32
	// Seed is the sampling seed; 0 when unset.
	Seed int64
	// MaxNewTokens is the most output tokens; values below 1 mean 1. The
	// engine-specific side applies its engine's default.
	MaxNewTokens uint32
	// MinNewTokens is how many output tokens come before a stop token counts.
	MinNewTokens uint32
	// MinP is the request's min_p, in [0, 1]; 0 when unset. The mock's
	// output is deterministic, so it is only recorded (State.LastMinP).
	MinP float32
	// StopTokenIDs end the generation when produced, the token included.
	StopTokenIDs []uint32
	// Err, if set, refuses the request with it (a gRPC status error) after
	// counting it and before checking the engine can serve: a bad request is
	// bad whatever the engine's state.
	Err error
}

// Chunk is one message of a generation, for the engine-specific side to
// format: TokensPerMessage new tokens, or fewer on the last.
type Chunk struct {
	// Tokens are the output tokens new in this message; an aborted
	// generation's last message may have none.
	Tokens []uint32
	// Finish is set on the last message only.
	Finish *Finish
}

// FinishReason says why a generation ended.
type FinishReason int

const (
	// FinishLength: MaxNewTokens were produced.
	FinishLength FinishReason = iota + 1
	// FinishStop: a stop token was produced; it is the last token.
	FinishStop
	// FinishAborted: Abort named the request, or AbortInFlight ran.
	FinishAborted
)

// Finish ends a generation.
type Finish struct {
	Reason FinishReason // why it ended
	// StopToken is the token that stopped the generation, for FinishStop.
	StopToken uint32
	// OutputTokens counts the generation's output tokens, all messages.
	OutputTokens uint32
}

// stream is one generation in flight.
type stream struct {
	id        string
	aborted   chan struct{}
	abortOnce sync.Once
	hold      *hold // taken when the stream starts
	fail      *fail
	// owed counts steps not yet turned into tokens (step mode); stepped
	// wakes the generation when a step comes.
	owed    atomic.Int64
	stepped chan struct{}
	held    atomic.Bool // waiting at a hold: out of the batch
	script  []uint32    // the output, when POST /script set one
	// scriptEOS: the script ends with FinishStop (ScriptEOS).
	scriptEOS bool
}

func (s *stream) abort() { s.abortOnce.Do(func() { close(s.aborted) }) }

// hold stops streams before output token at until release is closed.
type hold struct {
	at      uint32
	release chan struct{}
}

// fail ends one stream with code before output token at.
type fail struct {
	at    uint32
	code  codes.Code
	every bool // every stream from now on, not the next only
}

var errAborted = errors.New("request aborted")

// Generate runs one generation, calling send for each message in order. The
// output is deterministic (see OutputToken); messages are TokenDelay apart,
// or in step mode each token comes at a step of the engine (StepInterval);
// POST /hold and /fail act on it. It returns nil once the last message is
// sent (an aborted generation too, after a FinishAborted message), send's
// error, or a gRPC status: UNAVAILABLE when the engine is not ready,
// stopped, asleep or paused; the code POST /fail named; the context's.
func (e *Engine) Generate(ctx context.Context, req Request, send func(Chunk) error) error {
	st, err := e.begin(req)
	if err != nil {
		return err
	}
	defer e.end(st)
	r := &run{ctx: ctx, st: st, send: send, delay: e.cfg.TokenDelay, perMsg: e.cfg.TokensPerMessage, stepMode: e.cfg.StepInterval > 0, stamp: e.stamp.Load()}
	err = r.loop(req)
	if errors.Is(err, errAborted) {
		return r.emit(&Finish{Reason: FinishAborted, OutputTokens: r.produced})
	}
	return err
}

// Script makes every generation that starts from now on output tokens, in
// order, and end (FinishLength) after the last of them, or at MaxNewTokens
// first; stop tokens act as usual. Empty: back to OutputToken's. POST
// /script {"tokens": [...]} calls it.
func (e *Engine) Script(tokens []uint32) { e.ScriptSeq(Script{Tokens: tokens}) }

// ScriptEOS is Script, but a generation that outputs every token ends
// with FinishStop, as a model ends at its end of sequence (which a mock
// does not know). POST /script {"tokens": [...], "eos": true} calls it.
func (e *Engine) ScriptEOS(tokens []uint32) { e.ScriptSeq(Script{Tokens: tokens, EOS: true}) }

// Script is one generation's scripted output (ScriptSeq).
type Script struct {
	// Tokens are the output token ids, in order; none: OutputToken's
	// output (and EOS does nothing).
	Tokens []uint32 `json:"tokens"`
	// EOS ends the generation with FinishStop after the last token, as
	// ScriptEOS; false: FinishLength, as Script.
	EOS bool `json:"eos"`
}

// ScriptSeq scripts the generations that start from now on in turn, so a
// test can play a multi-step exchange such as an agent's tool loop (a tool
// call, then the answer): the first takes scripts[0], the next scripts[1],
// and so on; the last stays for every later generation. Each script acts as
// Script or ScriptEOS. None: back to OutputToken's for all. A generation
// the engine refuses takes none. POST /script {"scripts": [...]} calls it.
func (e *Engine) ScriptSeq(scripts ...Script) {
	var q []Script
	for _, s := range scripts {
		if len(s.Tokens) == 0 {
			q = append(q, Script{})
			continue
		}
		q = append(q, Script{Tokens: slices.Clone(s.Tokens), EOS: s.EOS})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scripts = q
}

// nextScriptLocked is the script of a generation starting now, taken off
// the queue unless it is the last.
func (e *Engine) nextScriptLocked() Script {
	if len(e.scripts) == 0 {
		return Script{}
	}
	s := e.scripts[0]
	if len(e.scripts) > 1 {
		e.scripts = e.scripts[1:]
	}
	return s
}

// begin counts the request and registers it in flight if the engine can serve it.
func (e *Engine) begin(req Request) (*stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests[req.ID]++
	e.reqTotal++
	e.lastPrompt = append(e.lastPrompt[:0], req.Prompt...)
	e.lastMinP = req.MinP
	if req.Err != nil {
		return nil, req.Err
	}
	if err := e.unavailableLocked(true); err != nil {
		return nil, err
	}
	sc := e.nextScriptLocked()
	st := &stream{id: req.ID, aborted: make(chan struct{}), hold: e.hold, fail: e.fail, script: sc.Tokens, scriptEOS: sc.EOS, stepped: make(chan struct{}, 1)}
	if e.fail != nil && !e.fail.every {
		e.fail = nil // one stream only
	}
	e.streams[st] = struct{}{}
	return st, nil
}

func (e *Engine) end(st *stream) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.streams, st)
}

// stepLoop steps the engine every interval until Stop: one ticker for
// every generation in flight.
func (e *Engine) stepLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-e.stepStop:
			return
		case <-t.C:
			e.step()
		}
	}
}

// step gives every generation in flight its next token.
func (e *Engine) step() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for st := range e.streams {
		st.owed.Add(1)
		select {
		case st.stepped <- struct{}{}:
		default: // already woken; owed counts the step
		}
	}
}

// Abort counts an abort for each id, known or not, and aborts its
// generations in flight.
func (e *Engine) Abort(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		e.aborts[id]++
		e.abortTotal++
		if ch, ok := e.abortSeen[id]; ok && e.aborts[id] == 1 {
			close(ch)
		}
		for st := range e.streams {
			if st.id == id {
				st.abort()
			}
		}
	}
}

// Hold holds every generation that starts from now on before its output
// token at (from 0), having sent the tokens before it, until Release or an
// abort; POST /hold does it over HTTP.
func (e *Engine) Hold(at uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := &hold{at: at, release: make(chan struct{})}
	if e.hold != nil {
		h.release = e.hold.release // one Release frees every held stream
	}
	e.hold = h
}

// Release frees every held generation and ends Hold; POST /release does
// it over HTTP.
func (e *Engine) Release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold != nil {
		close(e.hold.release)
		e.hold = nil
	}
	// Held generations rejoin the batch: their next token comes at the
	// next step, not at once for the steps they sat out.
	for st := range e.streams {
		if st.held.Load() {
			st.owed.Store(0)
		}
	}
}

// Aborted returns a channel that is closed once Abort has named id, at once
// if it already has: a test awaits the engine seeing an abort instead of
// polling State.
func (e *Engine) Aborted(id string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.abortSeen[id]
	if !ok {
		ch = make(chan struct{})
		e.abortSeen[id] = ch
		if e.aborts[id] > 0 {
			close(ch)
		}
	}
	return ch
}

// AbortInFlight aborts every generation in flight without counting aborts,
// for engines whose pause or sleep modes abort requests.
func (e *Engine) AbortInFlight() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for st := range e.streams {
		st.abort()
	}
}

// run is the state of one generation.
type run struct {
	ctx    context.Context
	st     *stream
	send   func(Chunk) error
	delay  time.Duration
	perMsg int
	// stepMode: tokens come at the engine's steps, not after delay.
	stepMode bool
	// stamp: every output token is its message's send time (stampToken).
	stamp bool

	sent     int    // messages sent
	produced uint32 // output tokens so far
	ids      []uint32
}

func (r *run) loop(req Request) error {
	stops := make(map[uint32]bool, len(req.StopTokenIDs))
	for _, id := range req.StopTokenIDs {
		stops[id] = true
	}
	seed, promptSum := uint32(req.Seed), sum(req.Prompt)

	for i := uint32(0); ; i++ {
		if h := r.st.hold; h != nil && i == h.at {
			if err := r.flush(); err != nil {
				return err
			}
			r.st.held.Store(true)
			err := wait(r, h.release)
			r.st.held.Store(false)
			if err != nil {
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
		if err := r.nextStep(); err != nil {
			return err
		}

		tok := outputToken(seed, promptSum, i)
		if script := r.st.script; script != nil {
			tok = script[i]
		}
		r.produced++
		r.ids = append(r.ids, tok)
		if fin := r.finish(req, stops, i, tok); fin != nil {
			fin.OutputTokens = r.produced
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

// finish is the end after the i-th token tok, or nil when it goes on.
func (r *run) finish(req Request, stops map[uint32]bool, i, tok uint32) *Finish {
	switch {
	// Engines ignore stop tokens until min_tokens are out.
	case stops[tok] && i+1 >= req.MinNewTokens:
		return &Finish{Reason: FinishStop, StopToken: tok}
	case r.st.scriptEOS && int(i)+1 >= len(r.st.script):
		return &Finish{Reason: FinishStop}
	case i+1 >= req.MaxNewTokens, r.st.script != nil && int(i)+1 >= len(r.st.script):
		return &Finish{Reason: FinishLength}
	}
	return nil
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

// nextStep waits, in step mode, for a step not yet turned into a token.
func (r *run) nextStep() error {
	if !r.stepMode {
		return nil
	}
	for {
		if r.st.owed.Load() > 0 {
			r.st.owed.Add(-1)
			return nil
		}
		if err := wait(r, r.st.stepped); err != nil {
			return err
		}
	}
}

// pause waits TokenDelay before every message but the first; in step mode
// the steps pace the tokens instead.
func (r *run) pause() error {
	if r.stepMode || r.sent == 0 || r.delay <= 0 {
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
func (r *run) emit(fin *Finish) error {
	if r.stamp {
		tok := stampToken(time.Now())
		for i := range r.ids {
			r.ids[i] = tok
		}
	}
	c := Chunk{Tokens: r.ids, Finish: fin}
	r.sent++
	r.ids = nil
	return r.send(c)
}
