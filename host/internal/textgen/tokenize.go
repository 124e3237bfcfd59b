package textgen

import (
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Vocab is what a Tokenizer needs beyond prompts for the Tokenize RPC
// (HF has it): text encoded without special tokens, and the vocabulary
// entries of ids.
type Vocab interface {
	// EncodeRaw returns text's token ids, no special tokens added.
	EncodeRaw(text string) ([]uint32, error)
	// Tokens returns each id's vocabulary entry, as transformers'
	// convert_ids_to_tokens; an id outside the vocabulary is an error.
	Tokens(ids []uint32) ([]string, error)
}

// CanTokenize reports whether Tokenize and Detokenize are served: the
// tokenizer is a Vocab.
func (e *Engine) CanTokenize() bool {
	_, ok := e.tok.(Vocab)
	return ok
}

// Tokenize answers the Tokenize RPC as vLLM's /tokenize: a text encoded
// with special tokens unless add_special_tokens is false; messages
// rendered as Generate renders them (developer roles, names, kwargs), the
// generation prompt appended unless add_generation_prompt is false, and
// encoded without special tokens unless add_special_tokens is true. Its
// errors are INVALID_ARGUMENT naming the field. CanTokenize must hold.
func (e *Engine) Tokenize(req *workerv1.TokenizeRequest) (*workerv1.TokenizeResponse, error) {
	vocab := e.tok.(Vocab)
	var ids []uint32
	var err error
	switch in := req.GetInput().(type) {
	case *workerv1.TokenizeRequest_Text:
		if req.AddSpecialTokens == nil || *req.AddSpecialTokens {
			ids, err = e.tok.Encode(in.Text)
		} else {
			ids, err = vocab.EncodeRaw(in.Text)
		}
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "text: tokenizing: %v", err)
		}
	case *workerv1.TokenizeRequest_Messages:
		if ids, err = e.tokenizeChat(req, in.Messages); err != nil {
			return nil, err
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "input: set text or messages")
	}
	resp := &workerv1.TokenizeResponse{TokenIds: ids, MaxModelLen: e.maxLen}
	if req.GetReturnTokenStrs() {
		if resp.TokenStrs, err = vocab.Tokens(ids); err != nil {
			return nil, status.Errorf(codes.Internal, "return_token_strs: %v", err)
		}
	}
	return resp, nil
}

// tokenizeChat is Tokenize for chat messages.
func (e *Engine) tokenizeChat(req *workerv1.TokenizeRequest, msgs *workerv1.Messages) ([]uint32, error) {
	genPrompt := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	ids, text, err := e.chatTokens(msgs, "messages", genPrompt)
	if err != nil || !req.GetAddSpecialTokens() {
		return ids, err
	}
	// vLLM's add_special_tokens on a chat: the special tokens on top of
	// what the template wrote (a second BOS, where the model adds one).
	if ids, err = e.tok.Encode(text); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "messages: tokenizing: %v", err)
	}
	return ids, nil
}

// Detokenize answers the Detokenize RPC as vLLM's /detokenize: the text
// of the ids, special tokens included (vLLM decodes a prompt so). An id
// outside the vocabulary is INVALID_ARGUMENT naming token_ids.
func (e *Engine) Detokenize(req *workerv1.DetokenizeRequest) (*workerv1.DetokenizeResponse, error) {
	text, err := e.tok.Decode(req.GetTokenIds())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "token_ids: %v", err)
	}
	return &workerv1.DetokenizeResponse{Text: text}, nil
}
