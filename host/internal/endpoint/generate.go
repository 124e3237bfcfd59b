package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/host/internal/stopstring"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// admission is one admitted request.
type admission struct {
	seq       uint64
	engine    sdk.Generator
	worker    sdk.Worker
	tokenizer Tokenizer
	ctx       context.Context
	progress  *atomic.Int64 // the request's last chunk, Unix nanoseconds
}

// admit admits a request or says why not, as a gRPC status.
func (s *Server) admit(parent context.Context) (admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := workerapi.CheckWorkerID(parent, s.workerID); err != nil {
		return admission{}, err
	}
	if !s.admitting {
		return admission{}, status.Error(codes.Unavailable, s.refusal)
	}
	if len(s.inflight) >= s.maxInflight {
		return admission{}, status.Errorf(codes.ResourceExhausted, "worker has %d requests in flight, the most it admits (--max-inflight)", s.maxInflight)
	}
	s.seq++
	ctx, cancel := context.WithCancelCause(parent)
	r := &request{cancel: cancel}
	r.progress.Store(time.Now().UnixNano())
	s.inflight[s.seq] = r
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return admission{seq: s.seq, engine: s.engine, worker: s.worker, tokenizer: s.tokenizer, ctx: ctx, progress: &r.progress}, nil
}

// forwarding records the engine-side id of a request about to be
// forwarded, so that a drain that cuts it can have the engine abort it.
func (s *Server) forwarding(a admission, engineID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.inflight[a.seq]; ok {
		r.engineID = engineID
	}
}

func (s *Server) release(a admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.inflight[a.seq]; ok {
		r.cancel(nil)
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
	}
	return err
}

// ended is how a request ended, for the Observer.
type ended struct {
	outcome            Outcome
	prompt, completion uint32
}

func (s *Server) generate(req *workerv1.GenerateRequest, stream workerv1.Worker_GenerateServer, e *ended) error {
	a, err := s.admit(stream.Context())
	if err != nil {
		e.outcome = OutcomeRefused
		if status.Code(err) == codes.ResourceExhausted {
			e.outcome = OutcomeOverloaded
		}
		return err
	}
	defer s.release(a)
	ids, err := validate(req, a.worker, a.tokenizer)
	if err != nil {
		e.outcome = OutcomeInvalid
		return err
	}
	id := req.GetRequestId()
	if id == "" {
		id = newRequestID()
	}
	// Clients may reuse ids; the engine must not see one twice.
	engineReq := toEngine(req, ids, id+"-"+strconv.FormatUint(a.seq, 10))
	f := newForward(stream, id, uint32(len(ids)))
	f.progress = a.progress
	if a.tokenizer != nil {
		// vigil detokenizes and matches stop strings itself: the engine
		// would match them on its own text, which a token-only engine
		// does not have.
		engineReq.Stop = nil
		f.out = &detokenizer{dec: a.tokenizer.NewDecoder(), stops: stopstring.New(req.GetStopping().GetStop())}
		if engineReq.MaxTokens == 0 && a.worker.MaxModelLen > 0 {
			// The prompt's length is known: the default is the rest of
			// the model's context, as OpenAI's and vLLM's, not the
			// engine's (vLLM's is 20 tokens). Less one: SGLang refuses
			// a prompt and max_new_tokens that reach its context length
			// (vLLM takes them), so that is the most every engine takes.
			engineReq.MaxTokens = max(a.worker.MaxModelLen-uint32(len(ids))-1, 1)
		}
	}
	s.forwarding(a, engineReq.RequestID)
	res, err := a.engine.Generate(a.ctx, engineReq, f.send)
	if f.out != nil && f.out.stopped && stream.Context().Err() == nil {
		// The engine's prompt count is lost with its result; ours is
		// the same prompt.
		e.outcome, e.prompt, e.completion = OutcomeOK, f.prompt, f.sentTokens
		return stream.Send(final(id, workerv1.FinishReason_FINISH_REASON_STOP, "", f.prompt, f.sentTokens))
	}
	if err == nil {
		return f.finish(res, e)
	}
	return s.failed(a, f, err, e)
}

// forward is one request's output on its way to the client.
type forward struct {
	stream     workerv1.Worker_GenerateServer
	id         string
	prompt     uint32 // the prompt's tokens, as far as vigil knows them
	out        *detokenizer
	progress   *atomic.Int64 // set to the time of every chunk, for Finish's stall cut
	sent       bool
	sentTokens uint32
	// One message per request, refilled for each chunk: Send marshals it
	// before it returns (the server has no stats handler that keeps it),
	// which saves three allocations per token.
	chunk *workerv1.Chunk
	msg   *workerv1.GenerateResponse
}

func newForward(stream workerv1.Worker_GenerateServer, id string, prompt uint32) *forward {
	chunk := &workerv1.Chunk{}
	return &forward{stream: stream, id: id, prompt: prompt, chunk: chunk,
		msg: &workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{Chunk: chunk}}}
}

// send is the engine's send function: it sends c to the client.
func (f *forward) send(c sdk.Chunk) error {
	f.sent = true
	if f.progress != nil {
		f.progress.Store(time.Now().UnixNano())
	}
	ids, text := c.TokenIDs, c.Text
	if f.out != nil {
		ids, text = f.out.next(ids)
	}
	f.sentTokens += uint32(len(ids))
	f.chunk.TokenIds, f.chunk.Text = ids, text
	if err := f.stream.Send(f.msg); err != nil {
		return err
	}
	if f.out != nil && f.out.stopped {
		// Failing send ends the adapter's stream, so the adapter
		// aborts the engine request.
		return errStopString
	}
	return nil
}

// finish sends the text held back, if any, and the final message of a
// generation that ended with res.
func (f *forward) finish(res sdk.Result, e *ended) error {
	reason := finishToProto(res.FinishReason)
	if f.out != nil {
		if tail, stopped := f.out.flush(); tail != "" || stopped {
			if tail != "" {
				f.chunk.TokenIds, f.chunk.Text = nil, tail
				if err := f.stream.Send(f.msg); err != nil {
					return err
				}
			}
			if stopped {
				reason = workerv1.FinishReason_FINISH_REASON_STOP
			}
		}
	}
	e.outcome, e.prompt, e.completion = OutcomeOK, res.PromptTokens, res.CompletionTokens
	return f.stream.Send(final(f.id, reason, "", res.PromptTokens, res.CompletionTokens))
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
	desc := fmt.Sprintf("engine request failed mid-stream: %v", err)
	if cut != nil {
		desc = cut.Error()
	}
	if sendErr := f.stream.Send(final(f.id, workerv1.FinishReason_FINISH_REASON_ERROR, desc, f.prompt, f.sentTokens)); sendErr != nil {
		return sendErr
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

// errStopString ends the engine's stream once a stop string matched.
var errStopString = errors.New("stop string matched")

// detokenizer is one request's output as vigil's own text: decoded
// incrementally and cut at the first stop string.
type detokenizer struct {
	dec     Decoder
	stops   *stopstring.Matcher
	stopped bool
}

// next returns the text ids complete that can be emitted now, and ids up
// to the one that completed a stop string, if one did: chunks merged on
// the way hold tokens generated after it, which do not count.
func (d *detokenizer) next(ids []uint32) ([]uint32, string) {
	if d.stopped {
		return nil, ""
	}
	var text strings.Builder
	for i := range ids {
		emit, stopped := d.stops.Push(d.dec.Next(ids[i : i+1]))
		text.WriteString(emit)
		if stopped {
			d.stopped = true
			return ids[:i+1], text.String()
		}
	}
	return ids, text.String()
}

// flush returns the text held back at the end of the output, and whether
// a stop string matched in it.
func (d *detokenizer) flush() (string, bool) {
	text, stopped := d.stops.Push(d.dec.Flush())
	if !stopped {
		text += d.stops.Flush()
	}
	d.stopped = stopped
	return text, stopped
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

// validate checks a request against the worker; every error is
// INVALID_ARGUMENT (or NOT_FOUND for the model) and names the field. It
// returns the prompt's token ids, given or rendered from messages by tok;
// nil for a text prompt without tok.
func validate(req *workerv1.GenerateRequest, w sdk.Worker, tok Tokenizer) ([]uint32, error) {
	if m := req.GetModel(); m != "" && m != w.ServedModelName {
		return nil, status.Errorf(codes.NotFound, "model %q: this worker serves %q", m, w.ServedModelName)
	}
	ids, field, err := promptTokens(req, w, tok)
	if err != nil {
		return nil, err
	}
	promptLen := uint32(len(ids))
	if max := w.MaxModelLen; max > 0 {
		mt := req.GetStopping().GetMaxTokens()
		switch {
		case ids == nil && mt > max:
			// A text prompt's length only the engine knows: no numbers
			// to give but these.
			return nil, status.Errorf(codes.InvalidArgument, "stopping.max_tokens: %d exceeds the model's maximum length %d", mt, max)
		case ids == nil:
		case promptLen >= max:
			return nil, contextLengthError(field, max, promptLen, mt)
		case mt > max-promptLen:
			return nil, contextLengthError("stopping.max_tokens", max, promptLen, mt)
		}
	}
	if st := req.GetStopping(); st.GetMaxTokens() > 0 && st.GetMinTokens() > st.GetMaxTokens() {
		return nil, status.Errorf(codes.InvalidArgument, "stopping.min_tokens: %d exceeds stopping.max_tokens %d", st.GetMinTokens(), st.GetMaxTokens())
	}
	if err := validateSampling(req.GetSampling()); err != nil {
		return nil, err
	}
	return ids, nil
}

// promptTokens is the prompt's token ids, given or rendered from messages
// by tok (nil for a text prompt without tok), and the prompt field they
// come from.
func promptTokens(req *workerv1.GenerateRequest, w sdk.Worker, tok Tokenizer) ([]uint32, string, error) {
	switch p := req.GetPrompt().(type) {
	case *workerv1.GenerateRequest_Text:
		if p.Text == "" {
			return nil, "", status.Error(codes.InvalidArgument, "prompt: must not be empty")
		}
		if tok != nil {
			// Token ids to every engine: never text the engine
			// tokenizes again with a second BOS.
			ids, err := tok.Encode(p.Text)
			if err != nil {
				return nil, "", status.Errorf(codes.InvalidArgument, "prompt.text: tokenizing: %v", err)
			}
			if len(ids) == 0 {
				return nil, "", status.Error(codes.InvalidArgument, "prompt.text: encodes to no tokens")
			}
			return ids, "prompt.text", nil
		}
		if !w.SupportsTextInput {
			return nil, "", status.Error(codes.InvalidArgument, "prompt.text: this worker's engine takes token ids only; send prompt.token_ids")
		}
		return nil, "prompt.token_ids", nil
	case *workerv1.GenerateRequest_TokenIds:
		ids := p.TokenIds.GetIds()
		if len(ids) == 0 {
			return nil, "", status.Error(codes.InvalidArgument, "prompt: must not be empty")
		}
		return ids, "prompt.token_ids", nil
	case *workerv1.GenerateRequest_Messages:
		ids, err := chatTokens(p.Messages, tok)
		return ids, "prompt.messages", err
	}
	return nil, "", status.Error(codes.InvalidArgument, "prompt: must not be empty: set prompt.text, prompt.token_ids or prompt.messages")
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

// toEngine is req as the adapter takes it, with ids (validate's) as its
// prompt when not nil.
func toEngine(req *workerv1.GenerateRequest, ids []uint32, engineID string) sdk.GenerateRequest {
	st := req.GetStopping()
	r := sdk.GenerateRequest{
		RequestID:    engineID,
		Text:         req.GetText(),
		MaxTokens:    st.GetMaxTokens(),
		StopTokenIDs: st.GetStopTokenIds(),
		Stop:         st.GetStop(),
		IgnoreEOS:    st.GetIgnoreEos(),
		MinTokens:    st.GetMinTokens(),
	}
	if s := req.GetSampling(); s != nil {
		r.Temperature, r.TopP, r.TopK, r.Seed, r.MinP = s.Temperature, s.TopP, s.TopK, s.Seed, s.GetMinP()
	}
	if ids != nil {
		r.TokenIDs, r.Text = ids, ""
	}
	return r
}
