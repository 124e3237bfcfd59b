package endpoint

import (
	"fmt"
	"strconv"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ChatMessage is one turn of a chat prompt (vigil.worker.v1 Message).
type ChatMessage struct {
	// Role is "system", "user", "assistant" or another role the chat
	// template knows.
	Role string
	// Content is the turn's text.
	Content string
}

// Tokenizer is the model's own tokenization, beside the engine: with one
// set (SetTokenizer), the worker sends every engine token ids (text
// prompts encoded, chat prompts rendered and encoded), detokenizes the
// output itself and matches stop strings on that text. Its methods are
// called from many goroutines at once.
type Tokenizer interface {
	// Encode returns a text prompt's token ids with the model's special
	// tokens added (its BOS, where it has one), as vLLM encodes a
	// completion prompt.
	Encode(text string) ([]uint32, error)
	// ChatTokens returns the token ids of msgs rendered with the chat
	// template, the generation prompt appended, then encoded without
	// adding special tokens again (the rendering holds the BOS where the
	// template puts one). An error (a template that rejects a role, say)
	// is the client's, and is returned as INVALID_ARGUMENT naming
	// prompt.messages.
	ChatTokens(msgs []ChatMessage) ([]uint32, error)
	// HasChatTemplate reports whether ChatTokens has a template: without
	// one, prompt.messages is refused.
	HasChatTemplate() bool
	// NewDecoder returns a Decoder for one request's output.
	NewDecoder() Decoder
}

// Decoder turns one request's output token ids into text incrementally,
// never returning part of a character: the concatenation of every Next
// and the final Flush is the text of all the ids, special tokens skipped.
type Decoder interface {
	Next(ids []uint32) string
	Flush() string
}

// errNoChatTemplate answers prompt.messages on a worker without a
// Tokenizer.
var errNoChatTemplate = status.Error(codes.InvalidArgument, "prompt.messages: this worker has no chat template loaded, "+
	"so it cannot take chat messages; start its vigil run with --tokenizer-dir DIR (the model's tokenizer.json and "+
	"tokenizer_config.json with a chat_template) or --chat-template FILE, or send prompt.text or prompt.token_ids")

// chatTokens validates a messages prompt and renders it with t.
func chatTokens(p *workerv1.Messages, t Tokenizer) ([]uint32, error) {
	msgs := p.GetMessages()
	if len(msgs) == 0 {
		return nil, status.Error(codes.InvalidArgument, "prompt.messages: must not be empty")
	}
	chat := make([]ChatMessage, len(msgs))
	for i, m := range msgs {
		if m.GetRole() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "prompt.messages[%d].role: must not be empty", i)
		}
		chat[i] = ChatMessage{Role: m.GetRole(), Content: m.GetContent()}
	}
	if t == nil || !t.HasChatTemplate() {
		return nil, errNoChatTemplate
	}
	ids, err := t.ChatTokens(chat)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "prompt.messages: rendering the chat template: %v", err)
	}
	if len(ids) == 0 {
		return nil, status.Error(codes.InvalidArgument, "prompt.messages: the chat template rendered no tokens")
	}
	return ids, nil
}

// contextLengthError is the INVALID_ARGUMENT for a prompt of promptLen
// tokens, with maxTokens to generate, over a model of maxLen; field is
// the field at fault (the prompt's, or stopping.max_tokens), named first
// in the message.
func contextLengthError(field string, maxLen, promptLen, maxTokens uint32) error {
	var msg string
	if field == "stopping.max_tokens" {
		msg = fmt.Sprintf("%s: %d plus the prompt's %d tokens exceeds the model's maximum length %d", field, maxTokens, promptLen, maxLen)
	} else {
		msg = fmt.Sprintf("%s: %d tokens, but the model's maximum length is %d", field, promptLen, maxLen)
	}
	st, err := status.New(codes.InvalidArgument, msg).WithDetails(&errdetails.ErrorInfo{
		Reason: workerapi.ReasonContextLength, Domain: workerapi.ErrorDomain,
		Metadata: map[string]string{
			workerapi.MetaMaxModelLen:  strconv.FormatUint(uint64(maxLen), 10),
			workerapi.MetaPromptTokens: strconv.FormatUint(uint64(promptLen), 10),
			workerapi.MetaMaxTokens:    strconv.FormatUint(uint64(maxTokens), 10),
		},
	})
	if err != nil {
		return status.Error(codes.InvalidArgument, msg)
	}
	return st.Err()
}
