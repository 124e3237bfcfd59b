package endpoint

import (
	"context"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Tokens is what a wrapped engine with the model's tokenizer (package
// textgen) serves beyond prompts: the Tokenize and Detokenize RPCs.
// Their refusals are INVALID_ARGUMENT statuses naming the field.
type Tokens interface {
	// CanTokenize reports whether Tokenize and Detokenize are served.
	CanTokenize() bool
	Tokenize(req *workerv1.TokenizeRequest) (*workerv1.TokenizeResponse, error)
	Detokenize(req *workerv1.DetokenizeRequest) (*workerv1.DetokenizeResponse, error)
}

// errNoTokenizer answers Tokenize and Detokenize on a worker without the
// model's tokenizer. FAILED_PRECONDITION, not INVALID_ARGUMENT: the
// request is sound, the worker lacks what serves it, and another worker
// of the model (one that lists the tokenize capability) may serve it.
var errNoTokenizer = status.Error(codes.FailedPrecondition, "this worker has no tokenizer loaded, so it cannot tokenize; "+
	"start its vigil run with --tokenizer-dir DIR (the model's tokenizer.json), or send the request to a worker "+
	"that lists the tokenize capability")

// tokens returns the engine's Tokens for a request for model, or the
// status that refuses it: another worker's id (as Generate), no engine
// attached (UNAVAILABLE), another model (NOT_FOUND), no tokenizer
// (errNoTokenizer). It does not wait for admission: it never reaches
// the engine, so a draining worker still answers.
func (s *Server) tokens(ctx context.Context, model string) (Tokens, sdk.Generator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := workerapi.CheckWorkerID(ctx, s.workerID); err != nil {
		return nil, nil, err
	}
	if s.engine == nil {
		return nil, nil, status.Error(codes.Unavailable, s.refusal)
	}
	if model != "" && model != s.worker.ServedModelName {
		return nil, nil, status.Errorf(codes.NotFound, "model %q: this worker serves %q", model, s.worker.ServedModelName)
	}
	t, ok := s.engine.(Tokens)
	if !ok || !t.CanTokenize() {
		return nil, nil, errNoTokenizer
	}
	return t, s.engine, nil
}

// Tokenize returns the token ids of a text or of chat messages, as the
// worker would send them to the engine; see the Worker service in
// vigil.worker.v1.
func (s *Server) Tokenize(ctx context.Context, req *workerv1.TokenizeRequest) (*workerv1.TokenizeResponse, error) {
	t, engine, err := s.tokens(ctx, req.GetModel())
	if err != nil {
		return nil, err
	}
	if m, ok := req.GetInput().(*workerv1.TokenizeRequest_Messages); ok {
		if _, err := chatMessages(m.Messages, engine, "messages"); err != nil {
			return nil, err
		}
	}
	return t.Tokenize(req)
}

// Detokenize returns the text of token ids; see the Worker service in
// vigil.worker.v1.
func (s *Server) Detokenize(ctx context.Context, req *workerv1.DetokenizeRequest) (*workerv1.DetokenizeResponse, error) {
	t, _, err := s.tokens(ctx, req.GetModel())
	if err != nil {
		return nil, err
	}
	return t.Detokenize(req)
}
