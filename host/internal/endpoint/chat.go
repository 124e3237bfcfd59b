package endpoint

import (
	"context"
	"strings"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Prompts is what a wrapped engine (see Server.Wrap) takes beyond token
// ids: vigil run's tokenization (package textgen) takes text prompts
// whatever the adapter takes, and chat prompts when the model has a chat
// template; it matches stop strings on its own text. Its refusals carry
// an INVALID_ARGUMENT gRPC status naming the field, which the client gets
// as it is. The endpoint renders a request's prompt once (Prompt) and
// generates each of its n choices from it (GenerateFrom).
type Prompts interface {
	sdk.Generator
	// TakesText reports whether text prompts are taken whatever the
	// adapter reports (sdk.Worker.SupportsTextInput).
	TakesText() bool
	// TakesChat reports whether chat prompts (prompt.messages) are taken.
	TakesChat() bool
	// Prompt returns the token ids of req's prompt: chat rendered with
	// the chat template when not nil, else req.Text encoded, else
	// req.TokenIDs; with withText, its text too (the text as given, the
	// rendered chat, the ids decoded); and the field naming the prompt.
	Prompt(req sdk.GenerateRequest, chat *workerv1.Messages, withText bool) (ids []uint32, text, field string, err error)
	// GenerateFrom is Generate for a prompt Prompt returned, in
	// req.TokenIDs; field names it for a refusal of its length.
	GenerateFrom(ctx context.Context, req sdk.GenerateRequest, field string, send func(sdk.Chunk) error) (sdk.Result, error)
}

// errNoChatTemplate answers prompt.messages on a worker whose engine takes
// no chat prompts.
var errNoChatTemplate = status.Error(codes.InvalidArgument, "prompt.messages: this worker has no chat template loaded, "+
	"so it cannot take chat messages; start its vigil run with --tokenizer-dir DIR (the model's tokenizer.json and "+
	"tokenizer_config.json with a chat_template) or --chat-template FILE, or send prompt.text or prompt.token_ids")

// chatMessages validates a messages prompt for engine, which must take
// chat prompts; field names the messages in errors (prompt.messages for
// Generate).
func chatMessages(p *workerv1.Messages, engine sdk.Generator, field string) ([]*workerv1.Message, error) {
	msgs := p.GetMessages()
	if len(msgs) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: must not be empty", field)
	}
	for i, m := range msgs {
		if m.GetRole() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "%s[%d].role: must not be empty", field, i)
		}
	}
	if p, ok := engine.(Prompts); !ok || !p.TakesChat() {
		if field != promptMessages {
			return nil, status.Error(codes.InvalidArgument, field+strings.TrimPrefix(status.Convert(errNoChatTemplate).Message(), promptMessages))
		}
		return nil, errNoChatTemplate
	}
	return msgs, nil
}

// promptMessages is the messages prompt's field in GenerateRequest.
const promptMessages = "prompt.messages"
