package textgen

import (
	"context"
	"strings"

	"github.com/vigilhq/vigil/host/internal/outparse"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resumed is what generate needs of a stream another worker began
// (GenerateRequest.resume), its output ids being the end of the prompt:
// the text of them that worker held back (a stop string's possible
// start), unsent, and whether the prompt is a rendered chat, whose output
// keeps the parsers' markers.
type resumed struct {
	held string
	chat bool
}

// heldError is an engine's error with the text the stop strings held back
// when it came: what another worker must hold again to continue the
// stream.
type heldError struct {
	err  error
	held string
}

func (e *heldError) Error() string { return e.err.Error() }
func (e *heldError) Unwrap() error { return e.err }

// HeldText is the text the stop strings held back, unsent, when the
// engine failed.
func (e *heldError) HeldText() string { return e.held }

// CanResume reports that streams are continued from another worker's
// output: vigil's tokenizer decodes them.
func (e *Engine) CanResume() bool { return true }

// GenerateResumed continues a stream another worker began: req.TokenIDs
// is its prompt's ids, out the output ids that worker sent, held the text
// of them it held back, chat whether the prompt is a rendered chat. The
// engine's prompt is the prompt and out; max_tokens and min_tokens count
// out, and so does the result's usage, whose prompt is req.TokenIDs. The
// decoder goes on from out, and held is held again ahead of the new text,
// so the text continues where the other worker's left off.
func (e *Engine) GenerateResumed(ctx context.Context, req sdk.GenerateRequest, out []uint32, held string, chat bool, send func(sdk.Chunk) error) (sdk.Result, error) {
	done := uint32(len(out))
	if req.MaxTokens > 0 {
		if done >= req.MaxTokens {
			return sdk.Result{}, status.Errorf(codes.InvalidArgument, "resume.output_token_ids: %d ids reach stopping.max_tokens %d: nothing is left to generate", done, req.MaxTokens)
		}
		req.MaxTokens -= done
	}
	req.MinTokens -= min(req.MinTokens, done)
	prompt := uint32(len(req.TokenIDs))
	ids := append(append(make([]uint32, 0, len(req.TokenIDs)+len(out)), req.TokenIDs...), out...)
	res, err := e.generate(ctx, req, ids, "resume.prompt_token_ids", resumed{held: held, chat: chat}, send)
	if err == nil {
		// The engine's prompt held the output too: its cache may cover
		// more than the client's prompt.
		res.PromptTokens, res.CachedTokens = prompt, min(res.CachedTokens, prompt)
		res.CompletionTokens += done
	}
	return res, err
}

// ResumedText is the text of out, the output of prompt, that the other
// worker sent (held, its end, it did not): what a chat's output parsers
// read before the new text. A character cut at out's end is not in it:
// the resumed decoder gives it with the next text.
func (e *Engine) ResumedText(prompt, out []uint32, held string, chat bool) string {
	return strings.TrimSuffix(e.tok.NewDecoder(prompt, e.keep(chat)).Next(out), held)
}

// keep is the parsers' markers, kept in a chat's output (chat true).
func (e *Engine) keep(chat bool) []string {
	if chat && (e.ParsesReasoning() || e.ParsesToolCalls()) {
		return outparse.Markers(e.reasoning, e.toolCall)
	}
	return nil
}
