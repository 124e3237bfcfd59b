package router

import (
	"errors"

	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxMigrations is how many times vigil route moves one stream to
// another worker: past a lost engine and the next worker's drain, but
// not round a pool that fails every stream.
const DefaultMaxMigrations = 3

// MigrationObserver is an Observer that is also told of stream migrations.
type MigrationObserver interface {
	// Migration: a stream its worker could not finish was continued on
	// another worker (result MigrationResumed), or could not be
	// (MigrationFailed: no worker took it).
	Migration(model, result string)
}

// The results of a migration (MigrationObserver.Migration).
const (
	MigrationResumed = "resumed"
	MigrationFailed  = "failed"
)

// MigrationResults are the results of MigrationObserver.Migration, each a
// bounded label value.
var MigrationResults = []string{MigrationResumed, MigrationFailed}

// errHeld is what a migration's relay answers for a message it holds
// back or drops: no message reached the client, so the attempt has not
// started.
var errHeld = errors.New("held back for a migration")

// migration is what one request's stream keeps to be continued on
// another worker when its worker cannot finish it (docs/worker-api.md,
// "Resume"): the prompt's ids, the output ids relayed, and the worker's
// error final, held back until its stream's end says whether the stream
// goes on elsewhere. A request with n > 1 or with structured output
// (tool_choice required or named included) is not migrated: the engine's
// constraint would start again on the new worker.
type migration struct {
	max, moves int
	// want: the client asked for the prompt message itself (echo, the
	// prompt's logprobs).
	want   bool
	asked  *workerv1.GenerateRequest // req asking for the prompt's ids, once made
	prompt []uint32                  // the prompt's ids; nil until a worker sent them
	out    []uint32                  // the output ids relayed
	// final is the last worker's error final, not relayed yet; cause
	// the error of the stream it ended, which the client gets when no
	// other worker goes on.
	final *workerv1.GenerateResponse
	cause error
	from  discovery.Registration // the worker of the stream
	begun bool                   // the attempt under way got a message
	base  int                    // len(out) when the attempt began
	ended bool                   // a final reached the client
	// pending: the stream moved and no worker took it on yet; observe
	// is told how each move ends (nil: nobody).
	pending bool
	observe func(model, result string)
}

// newMigration is req's migration, up to max moves, each told to observe
// (nil: nobody); nil when req is not migrated.
func newMigration(req *workerv1.GenerateRequest, max int, observe func(model, result string)) *migration {
	tc := req.GetMessages().GetToolChoice()
	switch {
	case max <= 0, req.GetN() > 1, req.GetStructuredOutput().GetKind() != nil, req.GetResume() != nil,
		tc.GetFunction() != "", tc.GetMode() == workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return nil
	}
	return &migration{max: max, want: req.GetReturnPrompt() || req.GetLogprobs().GetPrompt(), observe: observe}
}

// request is what goes to ep: req asking for the prompt's ids, on a
// worker that can be left for another (it lists resume), else req (a
// resumed one among them).
func (m *migration) request(req *workerv1.GenerateRequest, ep discovery.Registration) *workerv1.GenerateRequest {
	if m == nil {
		return req
	}
	m.begun, m.base = false, len(m.out)
	if req.GetResume() == nil {
		m.prompt = nil // this worker's, not an earlier one's
	}
	if m.want || req.GetResume() != nil || !resumes(ep) {
		return req
	}
	if m.asked == nil {
		m.asked = proto.CloneOf(req)
		m.asked.ReturnPrompt = true
	}
	return m.asked
}

// resumes reports whether ep continues and leaves streams (capability
// resume).
func resumes(ep discovery.Registration) bool {
	_, ok := ep.Caps.Lookup(discovery.CapResume)
	return ok
}

// relay is send for an attempt: it keeps the ids, drops the prompt
// message the client did not ask for, and holds back an error final.
func (m *migration) relay(send func(discovery.Registration, *workerv1.GenerateResponse) error) func(discovery.Registration, *workerv1.GenerateResponse) error {
	if m == nil {
		return send
	}
	return func(ep discovery.Registration, msg *workerv1.GenerateResponse) error {
		if !m.begun {
			// Another worker took the stream on: the last one's end
			// is not the client's.
			m.begun, m.final, m.cause, m.from = true, nil, nil, ep
			m.told(MigrationResumed)
		}
		switch k := msg.GetKind().(type) {
		case *workerv1.GenerateResponse_Prompt:
			if m.prompt == nil {
				m.prompt = k.Prompt.GetTokenIds()
			}
			if !m.want {
				return errHeld
			}
		case *workerv1.GenerateResponse_Chunk:
			m.out = append(m.out, k.Chunk.GetTokenIds()...)
		case *workerv1.GenerateResponse_Final:
			if k.Final.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_ERROR && m.moves < m.max {
				m.final = msg
				return errHeld
			}
			m.ended = true
		}
		return send(ep, msg)
	}
}

// next reports whether a stream that broke with err after its first
// message goes on elsewhere, and if so returns its request there and what
// it asks of a worker: the same model, a worker that lists resume. The
// worker says so (RESUME_ELSEWHERE), or its stream broke without a final
// message (it died); a worker's error final without the reason is the
// engine's own failure, which another engine would likely repeat.
func (m *migration) next(req *workerv1.GenerateRequest, ask Ask, extra []discovery.Need, err error) (*workerv1.GenerateRequest, Ask, bool) {
	if m == nil || m.ended || m.moves >= m.max || m.prompt == nil || !resumes(m.from) {
		return nil, ask, false // a stream that ended, after its final, has nothing to resume
	}
	if !workerapi.ResumeElsewhere(err) && (m.final != nil || status.Code(err) != codes.Unavailable) {
		return nil, ask, false
	}
	m.cause = err
	if got := m.final.GetFinal().GetResume().GetOutputTokens(); got > uint32(len(m.out)-m.base) {
		return nil, ask, false // chunks lost on the way: the ids would not be the text sent
	}
	m.moves++
	m.pending = true
	r := proto.CloneOf(req)
	r.ReturnPrompt, r.N = false, 0
	if lp := r.GetLogprobs(); lp != nil {
		lp.Prompt, lp.PromptTop = false, 0
	}
	r.Resume = &workerv1.Resume{PromptTokenIds: m.prompt, OutputTokenIds: m.out}
	if rs := m.final.GetFinal().GetResume(); rs != nil {
		r.Resume.HeldText = proto.String(rs.GetHeldText())
	}
	ask.Model, ask.ModelID = m.from.Model, m.from.ModelID
	ask.Needs = append(append(needsOf(r), extra...), discovery.Need{Name: discovery.CapResume})
	return r, ask, true
}

// end is what a request whose last attempt ended with err returns: a
// stream that no other worker went on with ends as its worker ended it,
// the held final relayed.
func (m *migration) end(send func(discovery.Registration, *workerv1.GenerateResponse) error, err error) error {
	if m == nil {
		return err
	}
	m.told(MigrationFailed)
	if m.final == nil {
		if m.cause != nil {
			return m.cause
		}
		return err
	}
	final, cause := m.final, m.cause
	m.final = nil
	if sendErr := send(m.from, final); sendErr != nil {
		return errSend{sendErr}
	}
	if cause != nil {
		return cause
	}
	return err
}

// told tells observe how a pending move ended.
func (m *migration) told(result string) {
	if m.pending {
		m.pending = false
		if m.observe != nil {
			m.observe(m.from.Model, result)
		}
	}
}
