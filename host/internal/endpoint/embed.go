package endpoint

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errNotEmbedding answers Embed on a worker whose model is no embedding
// model, or whose adapter serves no embeddings: UNIMPLEMENTED, as an older
// worker's answer, so a router reads both alike.
func errNotEmbedding(model string) error {
	return status.Errorf(codes.Unimplemented, "model %q does not serve embeddings: this worker's engine serves no embedding model", model)
}

// errEmbeddingModel answers Generate on a worker of an embedding model,
// which generates nothing: INVALID_ARGUMENT, as vLLM answers chat and
// completions against a pooling model.
func errEmbeddingModel(model string) error {
	return status.Errorf(codes.InvalidArgument, "model %q is an embedding model: it serves embeddings (Embed, POST /v1/embeddings), not generation", model)
}

// Embed returns the embedding of one input; see the Worker service in
// vigil.worker.v1. It is admitted as a request of its own (--max-inflight,
// the drain), and its text is tokenized with the worker's tokenizer when
// it has one, else sent to the engine as text.
func (s *Server) Embed(ctx context.Context, req *workerv1.EmbedRequest) (*workerv1.EmbedResponse, error) {
	var e ended
	resp, err := s.embed(ctx, req, &e)
	if o := s.obs.Load(); o != nil {
		o.Finished(e.outcome, e.prompt, 0)
	}
	return resp, err
}

func (s *Server) embed(ctx context.Context, req *workerv1.EmbedRequest, e *ended) (*workerv1.EmbedResponse, error) {
	a, err := s.admit(ctx, 1)
	if err != nil {
		e.outcome = refusedOutcome(err)
		return nil, err
	}
	defer s.release(a)
	in, err := embedInput(req, a)
	if err != nil {
		e.outcome = OutcomeInvalid
		return nil, err
	}
	id := req.GetRequestId()
	if id == "" {
		id = newRequestID()
	}
	in.RequestID = id + "-" + strconv.FormatUint(a.seq, 10)
	e.prompt = uint32(len(in.TokenIDs))
	res, err := a.raw.(sdk.Embedder).Embed(a.ctx, in)
	if err != nil {
		return nil, s.embedFailed(ctx, a, id, err, e)
	}
	if len(res.Embedding) == 0 {
		e.outcome = OutcomeFailed
		s.log.Warn("embedding request failed: the engine returned an empty embedding", "request_id", id)
		return nil, status.Error(codes.Unavailable, "engine embedding request failed: the engine returned an empty embedding")
	}
	prompt := res.PromptTokens
	if prompt == 0 {
		prompt = uint32(len(in.TokenIDs))
	}
	e.outcome, e.prompt = OutcomeOK, prompt
	return &workerv1.EmbedResponse{Embedding: res.Embedding, PromptTokens: prompt}, nil
}

// refusedOutcome is the outcome of a request admit refused with err.
func refusedOutcome(err error) Outcome {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return OutcomeOverloaded
	case codes.InvalidArgument:
		return OutcomeInvalid
	}
	return OutcomeRefused
}

// embedInput checks an embedding request against the worker and returns
// the engine's request: token ids as given or as the worker's tokenizer
// encodes the text (special tokens added), else the text.
func embedInput(req *workerv1.EmbedRequest, a admission) (sdk.EmbedRequest, error) {
	w := a.worker
	if m := req.GetModel(); m != "" && m != w.ServedModelName {
		return sdk.EmbedRequest{}, status.Errorf(codes.NotFound, "model %q: this worker serves %q", m, w.ServedModelName)
	}
	if !a.accepts.embed {
		return sdk.EmbedRequest{}, errNotEmbedding(w.ServedModelName)
	}
	in := sdk.EmbedRequest{Dimensions: req.GetDimensions()}
	maxLen := w.MaxModelLen
	switch {
	case req.GetTokenIds() != nil:
		in.TokenIDs = req.GetTokenIds().GetIds()
		if err := inVocabulary(a, in.TokenIDs); err != nil {
			return sdk.EmbedRequest{}, err
		}
	case req.GetText() == "":
		return sdk.EmbedRequest{}, status.Error(codes.InvalidArgument, "input: must not be empty: set input.text or input.token_ids")
	case a.accepts.tokenize:
		resp, err := a.engine.(Tokens).Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Text{Text: req.GetText()}})
		if err != nil {
			return sdk.EmbedRequest{}, err
		}
		in.TokenIDs = resp.GetTokenIds()
		if maxLen == 0 {
			maxLen = resp.GetMaxModelLen()
		}
	default:
		in.Text = req.GetText() // the engine tokenizes it (SGLang's TextEmbed)
		return in, nil
	}
	field := "input.token_ids"
	if req.GetTokenIds() == nil {
		field = "input.text"
	}
	switch {
	case len(in.TokenIDs) == 0:
		return sdk.EmbedRequest{}, status.Errorf(codes.InvalidArgument, "%s: must not be empty", field)
	case maxLen > 0 && uint32(len(in.TokenIDs)) >= maxLen:
		// SGLang's limit: the input must leave room for one token.
		return sdk.EmbedRequest{}, workerapi.ContextLengthError(field, maxLen, uint32(len(in.TokenIDs)), 0)
	}
	return in, nil
}

// inVocabulary refuses, naming input.token_ids, ids outside the vocabulary
// of a worker with a tokenizer, as Detokenize does: the engine would embed
// them as whatever its table holds there, or fail.
func inVocabulary(a admission, ids []uint32) error {
	if !a.accepts.tokenize {
		return nil
	}
	if _, err := a.engine.(Tokens).Detokenize(&workerv1.DetokenizeRequest{TokenIds: ids}); err != nil {
		msg, _ := strings.CutPrefix(status.Convert(err).Message(), "token_ids: ")
		return status.Errorf(codes.InvalidArgument, "input.token_ids: %s", msg)
	}
	return nil
}

// embedFailed maps the engine's failure of an embedding request to the
// client's status as Generate does before its first chunk; an engine
// failure of no class is logged, its text kept from the client.
func (s *Server) embedFailed(ctx context.Context, a admission, id string, err error, e *ended) error {
	e.outcome = OutcomeFailed
	if ctx.Err() != nil {
		e.outcome = OutcomeCancelled
		return status.FromContextError(ctx.Err()).Err()
	}
	if cut := cutBy(a.ctx); cut != nil {
		e.outcome = OutcomeCut
		return status.Error(codes.Unavailable, cut.Error())
	}
	switch {
	case errors.Is(err, sdk.ErrInvalidArgument):
		e.outcome = OutcomeInvalid
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, sdk.ErrUnavailable), errors.Is(err, sdk.ErrPluginExited):
		return status.Errorf(codes.Unavailable, "engine unavailable: %v", err)
	case errors.Is(err, sdk.ErrUnimplemented):
		// An engine without the RPC (TensorRT-LLM's answers UNIMPLEMENTED):
		// never listed as embed, but said plainly if it happens.
		s.log.Warn("embedding request refused by the engine", "request_id", id, "error", err)
		return errNotEmbedding(a.worker.ServedModelName)
	}
	s.log.Warn("embedding request failed", "request_id", id, "error", err)
	return status.Error(codes.Unavailable, "engine embedding request failed; the worker's log has the engine's error")
}
