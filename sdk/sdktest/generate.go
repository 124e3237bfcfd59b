package sdktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// maxTokens is how many tokens the kit's requests ask for: enough for a
// generation held after its first to have more to come.
const maxTokens = 4

// request is a generation every engine can serve: a few token ids in, a
// few tokens out.
func request(id string) sdk.GenerateRequest {
	return sdk.GenerateRequest{RequestID: id, TokenIDs: []uint32{1, 2, 3}, MaxTokens: maxTokens}
}

// recorder is the send function the kit gives Generate. It counts the
// chunks and holds them to the contract: each one new output, none after
// Generate returned.
type recorder struct {
	id    string
	err   error           // what every send returns
	first chan struct{}   // closed by the first chunk
	check func(sdk.Chunk) // if set, sees every chunk, r.mu held

	mu       sync.Mutex
	chunks   int
	returned bool
	problems []string
}

// errLateSend answers a send after Generate returned, as a host would.
var errLateSend = errors.New("sdktest: send called after Generate returned")

func newRecorder(id string) *recorder { return &recorder{id: id, first: make(chan struct{})} }

func (r *recorder) send(c sdk.Chunk) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks++
	n := r.chunks
	if r.returned {
		r.problems = append(r.problems, fmt.Sprintf("send called with chunk %d after Generate returned its result, want no chunk after the final one", n))
		return errLateSend
	}
	if len(c.TokenIDs) == 0 && c.Text == "" && c.PromptLogprobs == nil {
		r.problems = append(r.problems, fmt.Sprintf("chunk %d has no token ids, no text and no PromptLogprobs, want new output in every chunk", n))
	}
	if r.check != nil {
		r.check(c)
	}
	if n == 1 {
		close(r.first)
	}
	return r.err
}

// count returns how many chunks were sent.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chunks
}

// report fails t with every problem seen so far.
func (r *recorder) report(t tb) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Errorf("Generate(%s): %s", r.id, p)
	}
}

// outcome is what Generate returned.
type outcome struct {
	res sdk.Result
	err error
}

// generate runs one generation on its own goroutine with rec as send; its
// outcome comes on the channel.
func generate(g sdk.Generator, ctx context.Context, req sdk.GenerateRequest, rec *recorder) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		res, err := g.Generate(ctx, req, rec.send)
		rec.mu.Lock()
		rec.returned = true
		rec.mu.Unlock()
		out <- outcome{res, err}
	}()
	return out
}

// generated runs one generation and returns its outcome.
func generated(t tb, g sdk.Generator, req sdk.GenerateRequest) (outcome, *recorder) {
	t.Helper()
	rec := newRecorder(req.RequestID)
	o, _ := receive(t, generate(g, t.Context(), req, rec), within, "return of Generate")
	return o, rec
}

// firstChunk waits for the first chunk of a generation the engine holds.
func firstChunk(t tb, rec *recorder, out <-chan outcome) {
	t.Helper()
	select {
	case <-rec.first:
	case o := <-out:
		t.Fatalf("Generate(%s) = %+v, %v before any chunk, want a chunk and the generation held by the engine", rec.id, o.res, o.err)
	case <-time.After(within):
		t.Fatalf("Generate(%s) sent no chunk within %v", rec.id, within)
	}
}

// returnsPromptly waits for Generate to return after what ended it.
func returnsPromptly(t tb, rec *recorder, out <-chan outcome, after string) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(promptly):
		t.Fatalf("Generate(%s) did not return within %v after %s", rec.id, promptly, after)
		panic("unreachable")
	}
}

// generator returns e as the sdk.Generator it claims to be, with its
// capabilities, skipping t when it claims not to be one.
func (k *kit) generator(t tb, e sdk.Engine) (sdk.Generator, sdk.Capabilities) {
	t.Helper()
	c := k.info(t, e).Capabilities
	if !c.Generate {
		t.Skip("Capabilities.Generate is false: the adapter forwards no requests")
	}
	g, ok := e.(sdk.Generator)
	if !ok {
		t.Skipf("Capabilities.Generate is true but %T is no sdk.Generator: see the Capabilities rule", e)
	}
	return g, c
}

// generating returns an adapter that claims Capabilities.Generate,
// started against a serving engine that takes requests, as the Generator
// it is, with its capabilities and the engine's address; it skips t
// otherwise.
func (k *kit) generating(t tb) (sdk.Generator, sdk.Capabilities, string) {
	t.Helper()
	e := k.engine(t)
	g, c := k.generator(t, e)
	if k.h.GenerateUnavailable {
		t.Skip("Harness.GenerateUnavailable: the engine takes no requests")
	}
	addr, _ := k.serving(t)
	k.started(t, e, addr)
	return g, c, addr
}

func checkCapabilities(t tb, k *kit) {
	e := k.engine(t)
	info, err := await(t, "Info", func() (sdk.AdapterInfo, error) { return e.Info(t.Context()) })
	if errors.Is(err, sdk.ErrUnimplemented) {
		// Across the boundary the sdk answers so for a false claim.
		t.Fatalf("Info() error = %v, want capabilities the adapter implements", err)
	}
	if err != nil {
		t.Fatalf("Info() error = %v, want nil", err)
	}
	c := info.Capabilities
	if err := sdk.CheckCapabilities(e, c); err != nil {
		t.Fatalf("Info() Capabilities = %+v of %T: %v", c, e, err)
	}
	if c.Abort && !c.Generate {
		t.Errorf("Info() Capabilities = %+v, want Generate with Abort: Abort ends forwarded requests", c)
	}
	if !c.Generate {
		return
	}
	g := e.(sdk.Generator) // CheckCapabilities said so
	addr, _ := k.serving(t)
	k.started(t, e, addr)
	if o, _ := generated(t, g, request(newRequestID())); errors.Is(o.err, sdk.ErrUnimplemented) {
		t.Errorf("Generate() error = %v with Capabilities.Generate true, want the request forwarded", o.err)
	}
	if !c.Abort {
		return
	}
	id := newRequestID()
	if _, err := await(t, "Abort", func() (struct{}, error) { return struct{}{}, g.Abort(t.Context(), []string{id}) }); err != nil {
		t.Errorf("Abort([%s]) of an unknown id = %v with Capabilities.Abort true, want nil: unknown ids are ignored", id, err)
	}
}

func checkGenerate(t tb, k *kit) {
	g, _, _ := k.generating(t)

	// Two at once, then one more: by its end, a send that a finished
	// generation makes late has had its chance to show.
	type run struct {
		rec *recorder
		out <-chan outcome
	}
	runs := make([]run, 0, 3)
	for range 2 {
		rec := newRecorder(newRequestID())
		runs = append(runs, run{rec, generate(g, t.Context(), request(rec.id), rec)})
	}
	check := func(r run) {
		t.Helper()
		o, _ := receive(t, r.out, within, "return of Generate")
		switch {
		case o.err != nil:
			t.Errorf("Generate(%s) error = %v, want nil", r.rec.id, o.err)
		case o.res.FinishReason != sdk.FinishStop && o.res.FinishReason != sdk.FinishLength:
			t.Errorf("Generate(%s) = %+v, want FinishReason stop or length", r.rec.id, o.res)
		case r.rec.count() == 0:
			t.Errorf("Generate(%s) = %+v with no chunk, want the output of up to %d tokens in chunks", r.rec.id, o.res, maxTokens)
		}
	}
	check(runs[0])
	check(runs[1])
	rec := newRecorder(newRequestID())
	runs = append(runs, run{rec, generate(g, t.Context(), request(rec.id), rec)})
	check(runs[2])
	for _, r := range runs {
		r.rec.report(t)
	}
}

func checkGenerateRejected(t tb, k *kit) {
	e := k.engine(t)
	g, _ := k.generator(t, e)
	if k.h.GenerateUnavailable {
		t.Skip("Harness.GenerateUnavailable: the engine takes no requests")
	}
	addr, _ := k.serving(t)
	if w := k.started(t, e, addr); w.SupportsTextInput {
		t.Skip("Worker.SupportsTextInput is true: the engine takes text prompts")
	}
	req := sdk.GenerateRequest{RequestID: newRequestID(), Text: "sdktest", MaxTokens: maxTokens}
	o, rec := generated(t, g, req)
	if !errors.Is(o.err, sdk.ErrInvalidArgument) {
		t.Errorf("Generate(Text: %q) to an engine that takes token ids only: error = %v, want an error wrapping sdk.ErrInvalidArgument", req.Text, o.err)
	}
	nothingSent(t, rec, "with its error")
}

// nothingSent checks that a generation that failed sent no chunk.
func nothingSent(t tb, rec *recorder, why string) {
	t.Helper()
	if n := rec.count(); n > 0 {
		t.Errorf("Generate(%s) sent %d chunks %s, want none: an error class before any chunk means nothing was generated", rec.id, n, why)
	}
	rec.report(t)
}

func checkGenerateUnavailable(t tb, k *kit) {
	unavailable := func(t tb, g sdk.Generator, why string) {
		t.Helper()
		o, rec := generated(t, g, request(newRequestID()))
		if !errors.Is(o.err, sdk.ErrUnavailable) {
			t.Errorf("Generate() %s: error = %v, want an error wrapping sdk.ErrUnavailable", why, o.err)
		}
		nothingSent(t, rec, why)
	}
	t.Run("refused", func(t tb) {
		if !k.h.GenerateUnavailable {
			t.Skip("Harness.GenerateUnavailable is false: the engine takes requests")
		}
		e := k.engine(t)
		g, _ := k.generator(t, e)
		addr, _ := k.serving(t)
		k.started(t, e, addr)
		unavailable(t, g, "to an engine that takes no requests")
	})
	t.Run("not ready", func(t tb) {
		e := k.engine(t)
		g, _ := k.generator(t, e)
		k.needReadiness(t, e)
		k.need(t, "NotReady")
		w, addr, _ := k.watching(t, t.Context(), e)
		k.h.NotReady(t, addr)
		w.expect(sdk.NotReady, "after the engine was made not ready")
		unavailable(t, g, "with the engine not ready")
	})
	t.Run("stopped", func(t tb) {
		e := k.engine(t)
		g, _ := k.generator(t, e)
		w, _, stop := k.watching(t, t.Context(), e)
		needStop(t, stop)
		stopped := stopInBackground(t, stop)
		w.lost("after the engine shut down")
		// Engines report failure before they stop taking requests (vLLM
		// drains after NOT_SERVING): ask once the engine is gone.
		select {
		case <-stopped:
		case <-time.After(within):
			t.Fatalf("the harness's stop did not return within %v", within)
		}
		unavailable(t, g, "after the engine shut down")
	})
}

// heldGenerating returns an adapter that claims Capabilities.Generate,
// started against a serving engine that takes requests, through the kit's
// proxy, which follows its engine streams; with its capabilities, the
// engine's address and the proxy. It skips t without Harness.Hold.
func (k *kit) heldGenerating(t tb) (sdk.Generator, sdk.Capabilities, string, *proxy) {
	t.Helper()
	k.need(t, "Hold")
	e := k.engine(t)
	g, c := k.generator(t, e)
	if k.h.GenerateUnavailable {
		t.Skip("Harness.GenerateUnavailable: the engine takes no requests")
	}
	addr, _ := k.serving(t)
	p := newProxy(t, addr)
	k.started(t, e, p.addr())
	return g, c, addr, p
}

// heldGen is a generation the engine holds after its first chunk.
type heldGen struct {
	rec     *recorder
	out     <-chan outcome  // what Generate returns
	aborted <-chan struct{} // from Harness.Aborted; nil without it
	p       *proxy
	mark    int // the proxy's first stream of the generation
}

// held starts a generation that the engine at addr holds after its first
// chunk, with ctx, through p.
func (k *kit) held(t tb, ctx context.Context, g sdk.Generator, addr string, p *proxy, rec *recorder) heldGen {
	t.Helper()
	k.h.Hold(t, addr)
	h := heldGen{rec: rec, p: p, mark: p.streams.mark()}
	if k.h.Aborted != nil {
		h.aborted = k.h.Aborted(t, addr, rec.id)
	}
	h.out = generate(g, ctx, request(rec.id), rec)
	firstChunk(t, rec, h.out)
	return h
}

// engineSawAbort checks that the engine sees the abort of a held
// generation within the bound: each engine stream the generation opened
// is reset or ended, and with Harness.Aborted the engine saw an abort of
// its id.
func engineSawAbort(t tb, h heldGen, after string) {
	t.Helper()
	if h.aborted != nil {
		select {
		case <-h.aborted:
		case <-time.After(promptly):
			t.Errorf("the engine saw no abort of request %s within %v after %s, want the request aborted", h.rec.id, promptly, after)
		}
	}
	switch opened, open := h.p.streams.awaitEnded(h.mark, promptly); {
	case opened == 0:
		t.Errorf("Generate(%s) opened no engine stream at StartRequest.EngineAddr, want its engine request sent there", h.rec.id)
	case len(open) > 0:
		t.Errorf("engine streams %q of request %s still open %v after %s, want each reset or ended: an engine left with its stream open goes on generating", open, h.rec.id, promptly, after)
	}
}

// endsAborted checks that a held generation, ended by what after says,
// returns promptly with an error that is want, and that the engine sees
// the abort.
func endsAborted(t tb, h heldGen, after string, want error) {
	t.Helper()
	if o := returnsPromptly(t, h.rec, h.out, after); !errors.Is(o.err, want) {
		t.Errorf("Generate(%s) after %s: error = %v, want an error wrapping %q", h.rec.id, after, o.err, want)
	}
	engineSawAbort(t, h, after)
	h.rec.report(t)
}

func checkGenerateCancel(t tb, k *kit) {
	g, _, addr, p := k.heldGenerating(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := k.held(t, ctx, g, addr, p, newRecorder(newRequestID()))
	cancel()
	endsAborted(t, h, "its ctx ended", context.Canceled)
}

// errSend is what send returns in GenerateSendError.
var errSend = errors.New("sdktest: the caller went away")

func checkGenerateSendError(t tb, k *kit) {
	g, _, addr, p := k.heldGenerating(t)
	rec := newRecorder(newRequestID())
	rec.err = errSend
	h := k.held(t, t.Context(), g, addr, p, rec)
	endsAborted(t, h, "send failed", errSend)
}

func checkAbort(t tb, k *kit) {
	g, c, addr, p := k.heldGenerating(t)
	if !c.Abort {
		t.Skip("Capabilities.Abort is false: the adapter aborts no requests")
	}
	h := k.held(t, t.Context(), g, addr, p, newRecorder(newRequestID()))
	id := h.rec.id
	if _, err := await(t, "Abort", func() (struct{}, error) { return struct{}{}, g.Abort(t.Context(), []string{id}) }); err != nil {
		t.Errorf("Abort([%s]) of a generation in flight = %v, want nil", id, err)
	}
	const after = "Abort named it"
	if o := returnsPromptly(t, h.rec, h.out, after); o.err == nil && o.res.FinishReason != sdk.FinishCancelled {
		t.Errorf("Generate(%s) after %s = %+v, want FinishReason cancelled (or an error)", id, after, o.res)
	}
	engineSawAbort(t, h, after)
	h.rec.report(t)
}

// ignoreEOS is the wire name of GenerateRequest.IgnoreEOS, which a refusal
// names first.
const ignoreEOS = "ignore_eos"

func checkGenerateIgnoreEOS(t tb, k *kit) {
	g, _, _ := k.generating(t)
	req := request(newRequestID())
	req.IgnoreEOS = true
	o, rec := generated(t, g, req)
	switch {
	case o.err == nil && o.res.FinishReason != sdk.FinishLength:
		t.Errorf("Generate(IgnoreEOS: true, MaxTokens: %d) = %+v, want FinishReason length: only max tokens ends it", maxTokens, o.res)
	case o.err == nil && rec.count() == 0:
		t.Errorf("Generate(IgnoreEOS: true) = %+v with no chunk, want the output of %d tokens in chunks", o.res, maxTokens)
	case o.err == nil:
		rec.report(t)
	case errors.Is(o.err, sdk.ErrInvalidArgument) && namesField(o.err, ignoreEOS):
		t.Logf("Generate(IgnoreEOS: true) refused: %v", o.err)
		nothingSent(t, rec, "with its refusal")
	default:
		t.Errorf("Generate(IgnoreEOS: true) error = %v, want the generation, or a refusal wrapping sdk.ErrInvalidArgument whose message starts %q: a field the engine cannot honour is refused, never dropped", o.err, "invalid argument: "+ignoreEOS+":")
	}
}

// namesField reports whether err's message, past its class, starts with
// the wire name field and a colon: the convention by which vigil's router
// fills the OpenAI error's param.
func namesField(err error, field string) bool {
	msg := strings.TrimPrefix(err.Error(), sdk.ErrInvalidArgument.Error()+": ")
	return strings.HasPrefix(msg, field+":")
}
