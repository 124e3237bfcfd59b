package endpoint

import (
	"context"
	"errors"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Resumes is a wrapped engine (vigil's tokenization, package textgen)
// that continues streams another worker began (GenerateRequest.resume;
// capability resume): it decodes their output ids as that worker did.
type Resumes interface {
	// CanResume reports whether streams are continued.
	CanResume() bool
	// GenerateResumed generates from req.TokenIDs, the other worker's
	// prompt ids, followed by out, its output ids; held is the text of
	// out it held back, chat whether the prompt is a rendered chat. Its
	// result counts out as output and req.TokenIDs as the prompt.
	GenerateResumed(ctx context.Context, req sdk.GenerateRequest, out []uint32, held string, chat bool, send func(sdk.Chunk) error) (sdk.Result, error)
	// ResumedText is the text of out, the output of prompt, that the
	// other worker sent: what the output parsers read first.
	ResumedText(prompt, out []uint32, held string, chat bool) string
}

// resumePrompt is prompt for a resumed stream: the prompt is the other
// worker's ids, not rendered again, and a chat's parsers are fed the text
// that worker sent (not sent again) before the new text. The prompt oneof
// is read for what the output is checked against (the tools offered).
func (s *Server) resumePrompt(pe Prompts, req *workerv1.GenerateRequest, p *plan, a accepts) (*choiceParsers, error) {
	rs := req.GetResume()
	r, ok := pe.(Resumes)
	switch {
	case !ok || !a.resume:
		return nil, lacks("resume", "a resumed stream")
	case len(rs.GetPromptTokenIds()) == 0:
		return nil, status.Error(codes.InvalidArgument, "resume.prompt_token_ids: must not be empty")
	case p.n > 1:
		return nil, status.Errorf(codes.InvalidArgument, "n: %d: a resumed stream is one choice; send n 1 with resume.index", p.n)
	case req.GetReturnPrompt() || req.GetLogprobs().GetPrompt():
		return nil, status.Error(codes.InvalidArgument, "return_prompt: a resumed stream's prompt went with its first worker's stream; omit it and logprobs.prompt")
	case p.engine.StructuredOutput != nil:
		return nil, status.Error(codes.InvalidArgument, "resume: a stream with structured output cannot be resumed: the engine's constraint would start again")
	}
	p.engine.TokenIDs, p.engine.Text, p.field, p.tokenized = rs.GetPromptTokenIds(), "", "resume.prompt_token_ids", true
	p.resume, p.chat = rs, req.GetMessages() != nil
	_, text, _, err := pe.Prompt(p.engine, nil, p.chat)
	if err != nil {
		return nil, err
	}
	parse, err := s.parsing(pe, req, text, p, a)
	switch {
	case err != nil:
		return nil, err
	case p.engine.StructuredOutput != nil:
		return nil, status.Error(codes.InvalidArgument, "resume: a stream constrained by tool_choice cannot be resumed: the engine's constraint would start again")
	case parse != nil:
		parse.feed(0, r.ResumedText(rs.GetPromptTokenIds(), rs.GetOutputTokenIds(), rs.GetHeldText(), p.chat), false, &workerv1.Chunk{})
	}
	return parse, nil
}

// lost reports whether a request that failed with err after output can
// be continued on another worker: its engine was lost (the adapter's
// sdk.ErrUnavailable, or the adapter gone), or the worker cut it (its
// grace period, a stall, an adapter that stopped answering).
func lost(ctx context.Context, err error) bool {
	return errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, sdk.ErrPluginExited) || cutBy(ctx) != nil
}

// heldText is the text the stop strings held back, unsent, when the
// request failed with err.
func heldText(err error) string {
	var h interface{ HeldText() string }
	if errors.As(err, &h) {
		return h.HeldText()
	}
	return ""
}
