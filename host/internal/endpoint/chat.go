package endpoint

import (
	"context"

	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Prompts is what a wrapped engine (see Server.Wrap) takes beyond token
// ids: vigil run's tokenization (package textgen) takes text prompts
// whatever the adapter takes, and chat prompts when the model has a chat
// template. Its refusals carry an INVALID_ARGUMENT gRPC status naming the
// field, which the client gets as it is.
type Prompts interface {
	sdk.Generator
	// TakesText reports whether text prompts are taken whatever the
	// adapter reports (sdk.Worker.SupportsTextInput).
	TakesText() bool
	// TakesChat reports whether chat prompts (prompt.messages) are taken.
	TakesChat() bool
	// GenerateChat is Generate for a chat prompt of msgs; req carries
	// no prompt.
	GenerateChat(ctx context.Context, msgs []*workerv1.Message, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error)
}

// errNoChatTemplate answers prompt.messages on a worker whose engine takes
// no chat prompts.
var errNoChatTemplate = status.Error(codes.InvalidArgument, "prompt.messages: this worker has no chat template loaded, "+
	"so it cannot take chat messages; start its vigil run with --tokenizer-dir DIR (the model's tokenizer.json and "+
	"tokenizer_config.json with a chat_template) or --chat-template FILE, or send prompt.text or prompt.token_ids")

// chatMessages validates a messages prompt for engine, which must take
// chat prompts.
func chatMessages(p *workerv1.Messages, engine sdk.Generator) ([]*workerv1.Message, error) {
	msgs := p.GetMessages()
	if len(msgs) == 0 {
		return nil, status.Error(codes.InvalidArgument, "prompt.messages: must not be empty")
	}
	for i, m := range msgs {
		if m.GetRole() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "prompt.messages[%d].role: must not be empty", i)
		}
	}
	if p, ok := engine.(Prompts); !ok || !p.TakesChat() {
		return nil, errNoChatTemplate
	}
	return msgs, nil
}
