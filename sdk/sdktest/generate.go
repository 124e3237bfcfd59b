package sdktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

// maxTokens is how many tokens the kit's requests ask for: enough for a
// generation held after its first to have more to come.
const maxTokens = 4

// request is a generation every engine can serve: a few token ids in, a
// few tokens out.
func request(id string) sdk.GenerateRequest {
	return sdk.GenerateRequest{RequestID: id, TokenIDs: []uint32{1, 2, 3}, MaxTokens: maxTokens, IgnoreEOS: true}
}

// recorder is the send function the kit gives Generate. It counts the
// chunks and holds them to the contract: each one new output, none after
// Generate returned.
type recorder struct {
	id    string
	err   error         // what every send returns
	first chan struct{} // closed by the first chunk

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
	if len(c.TokenIDs) == 0 && c.Text == "" {
		r.problems = append(r.problems, fmt.Sprintf("chunk %d has no token ids and no text, want new output in every chunk", n))
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
func (r *recorder) report(t *testing.T) {
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
func generated(t *testing.T, g sdk.Generator, req sdk.GenerateRequest) (outcome, *recorder) {
	t.Helper()
	rec := newRecorder(req.RequestID)
	o, _ := receive(t, generate(g, t.Context(), req, rec), within, "return of Generate")
	return o, rec
}

// firstChunk waits for the first chunk of a generation the engine holds.
func firstChunk(t *testing.T, rec *recorder, out <-chan outcome) {
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
func returnsPromptly(t *testing.T, rec *recorder, out <-chan outcome, after string) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(promptly):
		t.Fatalf("Generate(%s) did not return within %v after %s", rec.id, promptly, after)
		panic("unreachable")
	}
}

// engineSawAbort checks that the engine sees an abort of id within the
// bound.
func engineSawAbort(t *testing.T, aborted <-chan struct{}, id, after string) {
	t.Helper()
	select {
	case <-aborted:
	case <-time.After(promptly):
		t.Errorf("the engine saw no abort of request %s within %v after %s, want the request aborted", id, promptly, after)
	}
}

// generator returns e as the sdk.Generator it claims to be, with its
// capabilities, skipping t when it claims not to be one.
func (k *kit) generator(t *testing.T, e sdk.Engine) (sdk.Generator, sdk.Capabilities) {
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
func (k *kit) generating(t *testing.T) (sdk.Generator, sdk.Capabilities, string) {
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

func checkCapabilities(t *testing.T, k *kit) {
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

func checkGenerate(t *testing.T, k *kit) {
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

func checkGenerateRejected(t *testing.T, k *kit) {
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
func nothingSent(t *testing.T, rec *recorder, why string) {
	t.Helper()
	if n := rec.count(); n > 0 {
		t.Errorf("Generate(%s) sent %d chunks %s, want none: an error class before any chunk means nothing was generated", rec.id, n, why)
	}
	rec.report(t)
}

func checkGenerateUnavailable(t *testing.T, k *kit) {
	unavailable := func(t *testing.T, g sdk.Generator, why string) {
		t.Helper()
		o, rec := generated(t, g, request(newRequestID()))
		if !errors.Is(o.err, sdk.ErrUnavailable) {
			t.Errorf("Generate() %s: error = %v, want an error wrapping sdk.ErrUnavailable", why, o.err)
		}
		nothingSent(t, rec, why)
	}
	t.Run("refused", func(t *testing.T) {
		if !k.h.GenerateUnavailable {
			t.Skip("Harness.GenerateUnavailable is false: the engine takes requests")
		}
		e := k.engine(t)
		g, _ := k.generator(t, e)
		addr, _ := k.serving(t)
		k.started(t, e, addr)
		unavailable(t, g, "to an engine that takes no requests")
	})
	t.Run("not ready", func(t *testing.T) {
		e := k.engine(t)
		g, _ := k.generator(t, e)
		k.needReadiness(t, e)
		k.need(t, "NotReady")
		w, addr, _ := k.watching(t, t.Context(), e)
		k.h.NotReady(t, addr)
		w.expect(sdk.NotReady, "after the engine was made not ready")
		unavailable(t, g, "with the engine not ready")
	})
	t.Run("stopped", func(t *testing.T) {
		e := k.engine(t)
		g, _ := k.generator(t, e)
		w, _, stop := k.watching(t, t.Context(), e)
		stopInBackground(t, stop)
		w.lost("after the engine shut down")
		unavailable(t, g, "after the engine shut down")
	})
}

// held starts a generation that the engine holds after its first chunk,
// with ctx, once Hold and Aborted have been checked for; it returns the
// generation's outcome to come and the channel Aborted gives for it.
func (k *kit) held(t *testing.T, ctx context.Context, g sdk.Generator, addr string, rec *recorder) (<-chan outcome, <-chan struct{}) {
	t.Helper()
	k.h.Hold(t, addr)
	aborted := k.h.Aborted(t, addr, rec.id)
	out := generate(g, ctx, request(rec.id), rec)
	firstChunk(t, rec, out)
	return out, aborted
}

// endsAborted checks that a held generation, ended by what after says,
// returns promptly with an error that is want, and that the engine sees
// the abort.
func endsAborted(t *testing.T, rec *recorder, out <-chan outcome, aborted <-chan struct{}, after string, want error) {
	t.Helper()
	if o := returnsPromptly(t, rec, out, after); !errors.Is(o.err, want) {
		t.Errorf("Generate(%s) after %s: error = %v, want an error wrapping %q", rec.id, after, o.err, want)
	}
	engineSawAbort(t, aborted, rec.id, after)
	rec.report(t)
}

func checkGenerateCancel(t *testing.T, k *kit) {
	k.need(t, "Hold", "Aborted")
	g, _, addr := k.generating(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := newRecorder(newRequestID())
	out, aborted := k.held(t, ctx, g, addr, rec)
	cancel()
	endsAborted(t, rec, out, aborted, "its ctx ended", context.Canceled)
}

// errSend is what send returns in GenerateSendError.
var errSend = errors.New("sdktest: the caller went away")

func checkGenerateSendError(t *testing.T, k *kit) {
	k.need(t, "Hold", "Aborted")
	g, _, addr := k.generating(t)
	rec := newRecorder(newRequestID())
	rec.err = errSend
	out, aborted := k.held(t, t.Context(), g, addr, rec)
	endsAborted(t, rec, out, aborted, "send failed", errSend)
}

func checkAbort(t *testing.T, k *kit) {
	k.need(t, "Hold", "Aborted")
	g, c, addr := k.generating(t)
	if !c.Abort {
		t.Skip("Capabilities.Abort is false: the adapter aborts no requests")
	}
	rec := newRecorder(newRequestID())
	out, aborted := k.held(t, t.Context(), g, addr, rec)
	if _, err := await(t, "Abort", func() (struct{}, error) { return struct{}{}, g.Abort(t.Context(), []string{rec.id}) }); err != nil {
		t.Errorf("Abort([%s]) of a generation in flight = %v, want nil", rec.id, err)
	}
	const after = "Abort named it"
	engineSawAbort(t, aborted, rec.id, after)
	if o := returnsPromptly(t, rec, out, after); o.err == nil && o.res.FinishReason != sdk.FinishCancelled {
		t.Errorf("Generate(%s) after %s = %+v, want FinishReason cancelled (or an error)", rec.id, after, o.res)
	}
	rec.report(t)
}
