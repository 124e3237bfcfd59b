package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// admission is one admitted request.
type admission struct {
	seq      uint64
	engine   sdk.Generator
	raw      sdk.Generator // as attached: the adapter's, for Embed
	worker   sdk.Worker
	accepts  accepts
	ctx      context.Context
	progress *atomic.Int64 // the request's last chunk, Unix nanoseconds
}

// choices is the number of engine requests req takes: n, at least 1.
func choices(req *workerv1.GenerateRequest) int { return int(max(req.GetN(), 1)) }

// admit admits a request of n choices or says why not, as a gRPC status.
// Each choice is an engine request, so it counts n against
// --max-inflight.
func (s *Server) admit(parent context.Context, n int) (admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := workerapi.CheckWorkerID(parent, s.workerID); err != nil {
		return admission{}, err
	}
	if !s.admitting {
		return admission{}, status.Error(codes.Unavailable, s.refusal)
	}
	if n > 1 && uint32(n) > s.accepts.maxN {
		return admission{}, status.Errorf(codes.InvalidArgument, "n: %d exceeds the most choices this worker generates for one request, %d", n, max(s.accepts.maxN, 1))
	}
	if s.slots+n > s.maxInflight {
		return admission{}, status.Errorf(codes.ResourceExhausted, "worker has %d engine requests in flight, and %d more would exceed the most it admits (--max-inflight %d; a request counts its n)", s.slots, n, s.maxInflight)
	}
	s.seq++
	s.slots += n
	ctx, cancel := context.WithCancelCause(parent)
	r := &request{cancel: cancel, slots: n}
	r.progress.Store(time.Now().UnixNano())
	s.inflight[s.seq] = r
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return admission{seq: s.seq, engine: s.engine, raw: s.raw, worker: s.worker, accepts: s.accepts, ctx: ctx, progress: &r.progress}, nil
}

// forwarding records the engine-side ids of a request about to be
// forwarded, so that a drain that cuts it can have the engine abort them.
func (s *Server) forwarding(a admission, engineIDs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.inflight[a.seq]; ok {
		r.engineIDs = append(r.engineIDs, engineIDs...)
	}
}

func (s *Server) release(a admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.inflight[a.seq]; ok {
		r.cancel(nil)
		s.slots -= r.slots
		delete(s.inflight, a.seq)
	}
	if len(s.inflight) == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// Generate forwards one request through the adapter; see the Worker service
// in vigil.worker.v1 for the stream contract.
func (s *Server) Generate(req *workerv1.GenerateRequest, stream workerv1.Worker_GenerateServer) error {
	var e ended
	err := s.generate(req, stream, &e)
	if o := s.obs.Load(); o != nil {
		o.Finished(e.outcome, e.prompt, e.completion)
		if tc, ok := o.Observer.(ToolCallObserver); ok && (e.failures > 0 || e.dropped > 0) {
			tc.ToolCalls(e.failures, e.dropped)
		}
	}
	return err
}

// ended is how a request ended, for the Observer.
type ended struct {
	outcome            Outcome
	prompt, completion uint32
	failures, dropped  int // tool calls returned as content, and dropped
}

func (s *Server) generate(req *workerv1.GenerateRequest, stream workerv1.Worker_GenerateServer, e *ended) error {
	a, err := s.admit(stream.Context(), choices(req))
	if err != nil {
		e.outcome = OutcomeRefused
		switch status.Code(err) {
		case codes.ResourceExhausted:
			e.outcome = OutcomeOverloaded
		case codes.InvalidArgument:
			e.outcome = OutcomeInvalid
		}
		return err
	}
	defer s.release(a)
	p, err := validate(req, a.worker, a.engine, a.accepts)
	if err != nil {
		e.outcome = OutcomeInvalid
		return err
	}
	id := req.GetRequestId()
	if id == "" {
		id = newRequestID()
	}
	// Clients may reuse ids; the engine must not see one twice.
	engineID := id + "-" + strconv.FormatUint(a.seq, 10)
	p.engine.RequestID = engineID
	var pr *workerv1.Prompt
	var parse *choiceParsers
	if pe, ok := a.engine.(Prompts); ok {
		if req.GetResume() != nil {
			parse, err = s.resumePrompt(pe, req, &p, a.accepts)
		} else {
			pr, parse, err = s.prompt(pe, req, &p, a.accepts)
		}
		if err != nil {
			e.outcome = OutcomeInvalid
			return err
		}
	}
	f := newForward(stream, id, uint32(len(p.engine.TokenIDs)))
	f.parse, f.index, f.resumable = parse, req.GetResume().GetIndex(), p.n == 1
	f.prior = uint32(len(req.GetResume().GetOutputTokenIds()))
	f.progress = a.progress
	f.lp = newLogprobOut(p.engine, logprobTokens(a.engine), p.n)
	if err := f.start(pr); err != nil {
		e.outcome = OutcomeCancelled
		return err
	}
	if p.n > 1 {
		return s.fanOut(a, p, f, e)
	}
	s.forwarding(a, engineID)
	res, err := p.generate(a.ctx, a.engine, p.engine, f.send)
	if err == nil {
		return f.finish(res, e)
	}
	return s.failed(a, f, err, e)
}

// maxPromptLogprobs bounds the prompt's logprobs, positions times (1 +
// alternatives): they go in one message on each hop, within gRPC's 4 MiB
// (an entry with its text and bytes takes some 30 bytes).
const maxPromptLogprobs = 1 << 16

// prompt renders and encodes the prompt once, with vigil's tokenizer,
// into p, and returns the prompt message when the request asks for it
// (return_prompt, or the prompt's logprobs), nil otherwise, and a chat's
// output parsers (nil: none).
func (s *Server) prompt(pe Prompts, req *workerv1.GenerateRequest, p *plan, a accepts) (*workerv1.Prompt, *choiceParsers, error) {
	want := req.GetReturnPrompt() || req.GetLogprobs().GetPrompt()
	chat := req.GetMessages()
	ids, text, field, err := pe.Prompt(p.engine, chat, want || chat != nil)
	if err != nil {
		return nil, nil, err
	}
	p.engine.TokenIDs, p.engine.Text, p.field, p.tokenized = ids, "", field, true
	if lp := req.GetLogprobs(); lp.GetPrompt() && len(ids)*(1+int(lp.GetPromptTop())) > maxPromptLogprobs {
		return nil, nil, status.Errorf(codes.InvalidArgument, "logprobs.prompt: the prompt's %d tokens with %d alternatives each make more than "+
			"%d logprobs, which one message cannot carry; ask fewer alternatives or send a shorter prompt", len(ids), lp.GetPromptTop(), maxPromptLogprobs)
	}
	parse, err := s.parsing(pe, req, text, p, a)
	if err != nil || !want {
		return nil, parse, err
	}
	return &workerv1.Prompt{TokenIds: ids, Text: text}, parse, nil
}

// parsing sets up a chat's output parsers and, for tool_choice required
// or a named function, the structured output that constrains it.
func (s *Server) parsing(pe Prompts, req *workerv1.GenerateRequest, text string, p *plan, a accepts) (*choiceParsers, error) {
	pp, ok := pe.(Parsers)
	if !ok || req.GetMessages() == nil {
		return nil, nil
	}
	newParser, schema, err := pp.Parsing(req.GetMessages(), text)
	if err != nil {
		return nil, err
	}
	if schema != "" {
		o, err := toolSchema(schema, req, a)
		if err != nil {
			return nil, err
		}
		if p.engine.StructuredOutput, err = structured(o, a); err != nil {
			return nil, err
		}
	}
	return newChoiceParsers(newParser, req.GetMessages(), p.n), nil
}

// forward is one request's output on its way to the client.
type forward struct {
	stream     workerv1.Worker_GenerateServer
	id         string
	prompt     uint32        // the prompt's tokens, as far as vigil knows them
	progress   *atomic.Int64 // set to the time of every chunk, for Finish's stall cut
	sent       bool
	sentTokens uint32
	// One message per request, refilled for each chunk: Send marshals it
	// before it returns (the server has no stats handler that keeps it),
	// which saves three allocations per token.
	chunk *workerv1.Chunk
	msg   *workerv1.GenerateResponse
	lp    *logprobOut    // nil: no logprobs
	parse *choiceParsers // nil: the output passes as it is
	// index is added to the chunks' (a resumed stream's choice index);
	// resumable: one choice, whose failure after output may be resumed
	// elsewhere (Final.resume).
	index     uint32
	resumable bool
	// prior are the output tokens of a resumed stream that another
	// worker made: in the client's usage, not in this worker's counts.
	prior uint32
}

func newForward(stream workerv1.Worker_GenerateServer, id string, prompt uint32) *forward {
	chunk := &workerv1.Chunk{}
	return &forward{stream: stream, id: id, prompt: prompt, chunk: chunk,
		msg: &workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: chunk}}}
}

// send is the engine's send function: it sends c to the client.
func (f *forward) send(c sdk.Chunk) error {
	f.sentTokens += uint32(len(c.TokenIDs))
	return f.emit(0, c)
}

// start sends pr, the prompt message, first; with the prompt's logprobs
// it waits for them (emit).
func (f *forward) start(pr *workerv1.Prompt) error {
	switch {
	case pr == nil:
		return nil
	case f.lp != nil && f.lp.promptLogprobs:
		f.lp.prompt = pr
		return nil
	}
	return f.stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Prompt{Prompt: pr}})
}

// emit sends c as choice i's chunk. The prompt message, which comes
// first, waits for the prompt's logprobs: an engine that gives them last
// (SGLang and TensorRT-LLM give them with the end of the output) has the
// output held until then.
func (f *forward) emit(i uint32, c sdk.Chunk) error {
	if f.progress != nil {
		f.progress.Store(time.Now().UnixNano())
	}
	if len(c.TokenIDs) == 0 && c.Text == "" && len(c.Logprobs) == 0 && c.PromptLogprobs == nil {
		return nil // progress only (output dropped after a stop string)
	}
	if c.PromptLogprobs != nil {
		if f.waiting() {
			if err := f.sendPrompt(c.PromptLogprobs); err != nil {
				return err
			}
		}
		if len(c.TokenIDs) == 0 && c.Text == "" && len(c.Logprobs) == 0 {
			return nil // the prompt's logprobs alone (another choice's too)
		}
	}
	f.chunk.TokenIds, f.chunk.Text, f.chunk.Index = c.TokenIDs, c.Text, f.index+i
	if f.parse != nil {
		f.parse.feed(i, c.Text, false, f.chunk)
	}
	f.chunk.Logprobs = f.lp.convert(i, c.Logprobs)
	if f.waiting() {
		// Held, not sent: a failure now is still one before the output.
		f.lp.held = append(f.lp.held, proto.CloneOf(f.msg))
		return nil
	}
	f.sent = true
	return f.stream.Send(f.msg)
}

// waiting reports whether the output waits for the prompt's logprobs.
func (f *forward) waiting() bool { return f.lp != nil && f.lp.prompt != nil && !f.lp.promptSent }

// sendPrompt sends the prompt message with lps, its logprobs, then the
// output held for it.
func (f *forward) sendPrompt(lps []sdk.TokenLogprob) error {
	f.lp.promptSent, f.sent = true, true
	if err := f.stream.Send(f.lp.promptMessage(lps)); err != nil {
		return err
	}
	for _, m := range f.lp.held {
		if err := f.stream.Send(m); err != nil {
			return err
		}
	}
	f.lp.held = nil
	return nil
}

// flushPrompt sends the prompt message and the output held for it when
// the prompt's logprobs never came.
func (f *forward) flushPrompt() error {
	if !f.waiting() {
		return nil
	}
	return f.sendPrompt(nil)
}

// flushParsers sends what each choice's parser held at the output's end
// (a call without its closing markup, text that might have begun one),
// and counts the calls returned as content and dropped into e.
func (f *forward) flushParsers(e *ended) error {
	if f.parse == nil {
		return nil
	}
	for i, p := range f.parse.parsers {
		if p == nil {
			continue
		}
		chunk := &workerv1.Chunk{Index: f.index + uint32(i)}
		f.parse.feed(uint32(i), "", true, chunk)
		if chunk.Text == "" && chunk.ReasoningText == "" && len(chunk.ToolCalls) == 0 {
			continue
		}
		f.sent = true
		if err := f.stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: chunk}}); err != nil {
			return err
		}
	}
	e.failures, e.dropped = f.parse.counts()
	return nil
}

// finish sends the final message of a generation that ended with res.
func (f *forward) finish(res sdk.Result, e *ended) error {
	if err := f.flushPrompt(); err != nil {
		return err
	}
	if err := f.flushParsers(e); err != nil {
		return err
	}
	reason := f.parse.finishReason(0, finishToProto(res.FinishReason))
	e.outcome, e.prompt, e.completion = OutcomeOK, res.PromptTokens, res.CompletionTokens-min(f.prior, res.CompletionTokens)
	m := final(f.id, reason, "", res.PromptTokens, res.CompletionTokens)
	m.GetFinal().Usage.CachedTokens = res.CachedTokens
	return f.stream.Send(m)
}

// failed ends a generation that failed with err: as a status before its
// first chunk, else with an error final message.
func (s *Server) failed(a admission, f *forward, err error, e *ended) error {
	e.outcome, e.prompt, e.completion = OutcomeFailed, f.prompt, f.sentTokens
	if ctx := f.stream.Context(); ctx.Err() != nil {
		e.outcome = OutcomeCancelled
		return status.FromContextError(ctx.Err()).Err()
	}
	cut := cutBy(a.ctx)
	if cut != nil {
		e.outcome = OutcomeCut
	}
	if !f.sent {
		if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument && cut == nil {
			// The wrapped engine's refusal, with its details (the
			// numbers of a prompt over the model's length).
			e.outcome = OutcomeInvalid
			return st.Err()
		}
		switch {
		case cut != nil:
			return status.Error(codes.Unavailable, cut.Error())
		case errors.Is(err, sdk.ErrInvalidArgument):
			e.outcome = OutcomeInvalid
			return status.Error(codes.InvalidArgument, err.Error())
		case errors.Is(err, sdk.ErrUnavailable), errors.Is(err, sdk.ErrPluginExited):
			return status.Errorf(codes.Unavailable, "engine unavailable: %v", err)
		}
		s.log.Warn("request failed before its first token", "request_id", f.id, "error", err)
		return status.Errorf(codes.Unavailable, "engine request failed: %v", err)
	}
	if err := f.flushPrompt(); err != nil {
		return err
	}
	desc := fmt.Sprintf("engine request failed mid-stream: %v", err)
	if cut != nil {
		desc = cut.Error()
	}
	m := final(f.id, workerv1.FinishReason_FINISH_REASON_ERROR, desc, f.prompt, f.prior+f.sentTokens)
	resume := f.resumable && lost(a.ctx, err)
	if resume {
		// Another worker can go on from here: a router that knows how
		// does (docs/worker-api.md, "Resume").
		m.GetFinal().Resume = &workerv1.ResumeState{OutputTokens: f.sentTokens, HeldText: heldText(err)}
	}
	if sendErr := f.stream.Send(m); sendErr != nil {
		return sendErr
	}
	if resume {
		return workerapi.ResumeElsewhereError(desc, f.sentTokens)
	}
	return status.Error(codes.Unavailable, desc)
}

// cutBy is what cut the request of ctx, if the worker did (a *cutError:
// the grace period, a stall, the engine's drain ending, an abandon); nil
// otherwise.
func cutBy(ctx context.Context) error {
	var cut *cutError
	if errors.As(context.Cause(ctx), &cut) {
		return cut
	}
	return nil
}

func final(id string, reason workerv1.FinishReason, desc string, prompt, completion uint32) *workerv1.GenerateResponse {
	return &workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{Final: &workerv1.Final{
		FinishReason: reason,
		Description:  desc,
		Usage:        &workerv1.Usage{PromptTokens: prompt, CompletionTokens: completion},
		RequestId:    id,
	}}}
}

func finishToProto(f sdk.FinishReason) workerv1.FinishReason {
	switch f {
	case sdk.FinishStop:
		return workerv1.FinishReason_FINISH_REASON_STOP
	case sdk.FinishLength:
		return workerv1.FinishReason_FINISH_REASON_LENGTH
	case sdk.FinishCancelled:
		return workerv1.FinishReason_FINISH_REASON_CANCELLED
	default:
		return workerv1.FinishReason_FINISH_REASON_ERROR
	}
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req-" + hex.EncodeToString(b[:])
}

// plan is a validated request: the engine request of its first choice
// and how to run it.
type plan struct {
	engine sdk.GenerateRequest
	n      uint32
	// tokenized: the prompt is engine.TokenIDs as vigil's tokenizer made
	// them (Prompts.Prompt), field naming it.
	tokenized bool
	field     string
	// resume: the stream another worker began, continued (Resumes);
	// chat: its prompt is a rendered chat.
	resume *workerv1.Resume
	chat   bool
}

// generate runs one engine request of the plan.
func (p *plan) generate(ctx context.Context, engine sdk.Generator, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	if rs := p.resume; rs != nil {
		return engine.(Resumes).GenerateResumed(ctx, req, rs.GetOutputTokenIds(), rs.GetHeldText(), p.chat, send)
	}
	if p.tokenized {
		return engine.(Prompts).GenerateFrom(ctx, req, p.field, send)
	}
	return engine.Generate(ctx, req, send)
}

// validate checks a request against the worker and its engine; every
// error is INVALID_ARGUMENT (or NOT_FOUND for the model) and names the
// field. It returns the request's plan, its prompt's token ids unset for
// a text or chat prompt.
func validate(req *workerv1.GenerateRequest, w sdk.Worker, engine sdk.Generator, a accepts) (plan, error) {
	if m := req.GetModel(); m != "" && m != w.ServedModelName {
		return plan{}, status.Errorf(codes.NotFound, "model %q: this worker serves %q", m, w.ServedModelName)
	}
	if a.embedModel {
		return plan{}, errEmbeddingModel(w.ServedModelName)
	}
	ids, _, err := promptOf(req, w, engine)
	if err != nil {
		return plan{}, err
	}
	if err := checkLength(req, w, engine, ids); err != nil {
		return plan{}, err
	}
	if err := validateSampling(req.GetSampling()); err != nil {
		return plan{}, err
	}
	if err := checkTaken(req, a); err != nil {
		return plan{}, err
	}
	so, err := structured(req.GetStructuredOutput(), a)
	if err != nil {
		return plan{}, err
	}
	return plan{engine: toEngine(req, ids, "", so), n: max(req.GetN(), 1)}, nil
}

// checkLength checks a token-id prompt and max_tokens against the
// model's length, where the engine does not.
func checkLength(req *workerv1.GenerateRequest, w sdk.Worker, engine sdk.Generator, ids []uint32) error {
	promptLen := uint32(len(ids))
	_, counts := engine.(Prompts) // it checks the lengths of the prompts it encodes, with the numbers
	if max := w.MaxModelLen; max > 0 {
		mt := req.GetStopping().GetMaxTokens()
		switch {
		case ids == nil && counts:
		case ids == nil && mt > max:
			// A text or chat prompt's length only the engine knows: no
			// numbers to give but these.
			return status.Errorf(codes.InvalidArgument, "stopping.max_tokens: %d exceeds the model's maximum length %d", mt, max)
		case ids == nil:
		case promptLen >= max:
			return workerapi.ContextLengthError("prompt.token_ids", max, promptLen, mt)
		case mt > max-promptLen:
			return workerapi.ContextLengthError("stopping.max_tokens", max, promptLen, mt)
		}
	}
	if st := req.GetStopping(); st.GetMaxTokens() > 0 && st.GetMinTokens() > st.GetMaxTokens() {
		return status.Errorf(codes.InvalidArgument, "stopping.min_tokens: %d exceeds stopping.max_tokens %d", st.GetMinTokens(), st.GetMaxTokens())
	}
	return nil
}

// promptOf is the prompt's token ids, or its chat messages, or neither for
// a text prompt, checked against what the engine takes.
func promptOf(req *workerv1.GenerateRequest, w sdk.Worker, engine sdk.Generator) ([]uint32, []*workerv1.Message, error) {
	switch p := req.GetPrompt().(type) {
	case *workerv1.GenerateRequest_Text:
		if p.Text == "" {
			return nil, nil, status.Error(codes.InvalidArgument, "prompt: must not be empty")
		}
		if pe, ok := engine.(Prompts); !w.SupportsTextInput && (!ok || !pe.TakesText()) {
			return nil, nil, status.Error(codes.InvalidArgument, "prompt.text: this worker's engine takes token ids only; send prompt.token_ids")
		}
		return nil, nil, nil
	case *workerv1.GenerateRequest_TokenIds:
		ids := p.TokenIds.GetIds()
		if len(ids) == 0 {
			return nil, nil, status.Error(codes.InvalidArgument, "prompt: must not be empty")
		}
		return ids, nil, nil
	case *workerv1.GenerateRequest_Messages:
		msgs, err := chatMessages(p.Messages, engine, promptMessages)
		return nil, msgs, err
	}
	return nil, nil, status.Error(codes.InvalidArgument, "prompt: must not be empty: set prompt.text, prompt.token_ids or prompt.messages")
}

// validateSampling checks the sampling parameters that have a range.
func validateSampling(s *workerv1.Sampling) error {
	if s == nil {
		return nil
	}
	if p := s.GetMinP(); !(p >= 0 && p <= 1) {
		return status.Errorf(codes.InvalidArgument, "sampling.min_p: %g: must be in [0, 1]", p)
	}
	if s.Temperature != nil && *s.Temperature < 0 {
		return status.Errorf(codes.InvalidArgument, "sampling.temperature: %g: must be 0 or more", *s.Temperature)
	}
	if s.TopP != nil && (*s.TopP <= 0 || *s.TopP > 1) {
		return status.Errorf(codes.InvalidArgument, "sampling.top_p: %g: must be in (0, 1]", *s.TopP)
	}
	return nil
}
