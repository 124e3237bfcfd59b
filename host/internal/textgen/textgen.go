// Package textgen is the worker's own tokenization, as a wrapper around
// the engine (the sdk.Generator the endpoint forwards to), built by vigil
// run from the model's directory: it encodes text prompts (special tokens
// added once), renders chat prompts with the chat template, sends every
// engine token ids, detokenizes the output incrementally, matches stop
// strings on that text (the engine never sees them: a match ends the
// engine's stream, so the adapter aborts it, and the request finishes with
// FinishStop) and sets max_tokens to the rest of the model's context when
// the request has none. The endpoint knows only what it takes
// (TakesText, TakesChat): the tokenizer behind it (Tokenizer) can change
// without the endpoint changing.
package textgen

import (
	"context"
	"errors"
	"strings"

	"github.com/vigilhq/vigil/host/internal/stopstring"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Message is one turn of a chat prompt (vigil.worker.v1 Message).
type Message struct {
	// Role is "system", "user", "assistant" or another role the chat
	// template knows ("developer" renders as system where it does not).
	Role string
	// Content is the turn's text.
	Content string
	// Name is the speaker's name, "" for none: the message's "name" key
	// in the template.
	Name string
	// ToolCalls are an assistant turn's function calls; none for nil.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool turn answers, "" for none.
	ToolCallID string
	// ReasoningContent is an assistant turn's reasoning, "" for none
	// (Qwen3's template renders it for turns after the last user turn).
	ReasoningContent string
}

// ToolCall is one function call of an assistant turn (vigil.worker.v1
// ToolCall).
type ToolCall struct {
	// ID is the call's id, which the tool turn answering it repeats.
	ID string
	// Type is "function", the only one ("" is taken as it).
	Type string
	// Name is the function's name.
	Name string
	// Arguments is the JSON text the model wrote (an object; "" for none).
	Arguments string
}

// Chat is a chat prompt: its turns and the template's extra variables.
type Chat struct {
	Messages []Message
	// Kwargs are chat_template_kwargs, JSON object text; "" for none.
	Kwargs string
	// Tools is OpenAI's tools array as JSON text, given to the template
	// as vLLM's server passes it; "" for none (tool_choice none too).
	Tools string
	// NoGenerationPrompt leaves out the assistant turn's opening (the
	// Tokenize RPC's add_generation_prompt false); Generate always wants it.
	NoGenerationPrompt bool
}

// Tokenizer is the model's tokenization. Its methods are called from many
// goroutines at once.
type Tokenizer interface {
	// Encode returns a text prompt's token ids with the model's special
	// tokens added (its BOS, where it has one), as vLLM encodes a
	// completion prompt.
	Encode(text string) ([]uint32, error)
	// ChatTokens returns the token ids of the chat rendered with the chat
	// template, the generation prompt appended, then encoded without
	// adding special tokens again, and the rendered text. An error (a
	// template that rejects a role, say) is the client's; one about
	// chat.Kwargs (not a JSON object, a key the renderer sets itself)
	// begins with "chat_template_kwargs", one about chat.Tools with
	// "tools", one about a message's field with "messages[" (a tool
	// call's arguments that are not a JSON object:
	// "messages[2].tool_calls[0].function.arguments: ...").
	ChatTokens(chat Chat) ([]uint32, string, error)
	// Decode returns the text of ids, special tokens included, as vLLM
	// echoes a token-id prompt.
	Decode(ids []uint32) (string, error)
	// HasChatTemplate reports whether ChatTokens has a template.
	HasChatTemplate() bool
	// NewDecoder returns a Decoder for one request's output, seeded with
	// its prompt's ids so that the output is decoded in their context (a
	// SentencePiece-style first token keeps its leading space). Special
	// tokens are skipped, except those whose text is in keep: the
	// markers a tool-call or reasoning parser reads ("<|python_tag|>",
	// "[TOOL_CALLS]", "<|channel|>"...); texts that are not special
	// tokens of the model are ignored (they are decoded anyway).
	NewDecoder(prompt []uint32, keep []string) Decoder
	// TemplateSource returns the chat template's text, "" without one:
	// what parser detection reads.
	TemplateSource() string
}

// Decoder turns one request's output token ids into text incrementally,
// never returning part of a character: the concatenation of every Next
// and the final Flush is the text of all the ids, special tokens skipped.
type Decoder interface {
	Next(ids []uint32) string
	Flush() string
}

// Engine is an engine with the worker's tokenization around it.
type Engine struct {
	engine sdk.Generator
	tok    Tokenizer
	maxLen uint32 // the model's length in tokens; 0: unknown
	// The reasoning and tool-call parsers' names (WithParsers); "": off.
	reasoning, toolCall string
}

// New returns engine with tok around it, for a model of maxModelLen
// tokens (0: unknown, then max_tokens keeps the engine's default).
func New(engine sdk.Generator, tok Tokenizer, maxModelLen uint32) *Engine {
	return &Engine{engine: engine, tok: tok, maxLen: maxModelLen}
}

// TakesText reports that text prompts are taken whatever the engine
// takes: they reach it as token ids.
func (e *Engine) TakesText() bool { return true }

// TakesChat reports whether chat prompts are taken: the tokenizer has a
// chat template.
func (e *Engine) TakesChat() bool { return e.tok.HasChatTemplate() }

// Abort is the engine's.
func (e *Engine) Abort(ctx context.Context, ids []string) error { return e.engine.Abort(ctx, ids) }

// Generate forwards req to the engine as token ids, a text prompt encoded
// first; see the package doc. A prompt the worker refuses (it does not
// encode, or is over the model's length) gets an INVALID_ARGUMENT status
// naming the field, with a workerapi.ReasonContextLength ErrorInfo for a
// length, before anything reaches the engine.
func (e *Engine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	ids, _, field, err := e.Prompt(req, nil, false)
	if err != nil {
		return sdk.Result{}, err
	}
	return e.generate(ctx, req, ids, field, resumed{}, send)
}

// GenerateChat is Generate for a chat prompt: msgs rendered with the chat
// template, the generation prompt appended, and encoded.
func (e *Engine) GenerateChat(ctx context.Context, msgs []*workerv1.Message, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	ids, _, field, err := e.Prompt(req, &workerv1.Messages{Messages: msgs}, false)
	if err != nil {
		return sdk.Result{}, err
	}
	return e.generate(ctx, req, ids, field, resumed{}, send)
}

// GenerateFrom is Generate for a prompt Prompt returned, in req.TokenIDs;
// field names it for a refusal of its length.
func (e *Engine) GenerateFrom(ctx context.Context, req sdk.GenerateRequest, field string, send func(sdk.Chunk) error) (sdk.Result, error) {
	return e.generate(ctx, req, req.TokenIDs, field, resumed{}, send)
}

// Prompt returns the token ids of req's prompt, once for all the choices
// of a request: chat (not nil) rendered with the chat template, the
// generation prompt appended, and encoded; else req.Text encoded with
// special tokens; else req.TokenIDs. With withText it returns the
// prompt's text too: the text as given, the rendered chat, or the ids
// decoded. field names the prompt. Its errors are INVALID_ARGUMENT
// statuses naming the field.
func (e *Engine) Prompt(req sdk.GenerateRequest, chat *workerv1.Messages, withText bool) (ids []uint32, text, field string, err error) {
	switch {
	case chat != nil:
		ids, text, err = e.chatTokens(chat, promptMessages, true)
		return ids, text, promptMessages, err
	case req.TokenIDs == nil:
		if ids, err = e.tok.Encode(req.Text); err != nil {
			return nil, "", "", status.Errorf(codes.InvalidArgument, "prompt.text: tokenizing: %v", err)
		}
		if len(ids) == 0 {
			return nil, "", "", status.Error(codes.InvalidArgument, "prompt.text: encodes to no tokens")
		}
		return ids, req.Text, "prompt.text", nil
	}
	if withText {
		if text, err = e.tok.Decode(req.TokenIDs); err != nil {
			return nil, "", "", status.Errorf(codes.InvalidArgument, "prompt.token_ids: decoding: %v", err)
		}
	}
	return req.TokenIDs, text, "prompt.token_ids", nil
}

// chatTokens renders and encodes a chat prompt, the generation prompt
// appended with genPrompt; field names the messages in errors.
func (e *Engine) chatTokens(p *workerv1.Messages, field string, genPrompt bool) ([]uint32, string, error) {
	if !e.tok.HasChatTemplate() {
		return nil, "", status.Errorf(codes.InvalidArgument, "%s: the model's tokenizer has no chat template", field)
	}
	ids, text, err := e.tok.ChatTokens(chatOf(p, genPrompt))
	switch {
	case err != nil && isFieldError(err):
		return nil, "", status.Errorf(codes.InvalidArgument, "%s.%v", field, err)
	case err != nil:
		return nil, "", status.Errorf(codes.InvalidArgument, "%s: rendering the chat template: %v", field, err)
	case len(ids) == 0:
		return nil, "", status.Errorf(codes.InvalidArgument, "%s: the chat template rendered no tokens", field)
	}
	return ids, text, nil
}

// promptMessages names a chat prompt.
const promptMessages = "prompt.messages"

// kwargsField begins a Tokenizer's error about chat_template_kwargs.
const kwargsField = "chat_template_kwargs"

// isFieldError reports whether a ChatTokens error names a field of the
// Messages (chat_template_kwargs, tools, messages[i]...), not the
// template's refusal.
func isFieldError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, kwargsField) || strings.HasPrefix(s, "tools") || strings.HasPrefix(s, "messages[")
}

// chatOf is p as the Tokenizer takes it. Tool choice none leaves the
// tools out, as the tool_choice none wants (vLLM's
// --exclude-tools-when-tool-choice-none); the other choices are the
// caller's to enforce.
func chatOf(p *workerv1.Messages, genPrompt bool) Chat {
	chat := Chat{Messages: make([]Message, len(p.GetMessages())), Kwargs: p.GetChatTemplateKwargs(), Tools: p.GetTools(), NoGenerationPrompt: !genPrompt}
	if p.GetToolChoice().GetMode() == workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE {
		chat.Tools = ""
	}
	for i, m := range p.GetMessages() {
		chat.Messages[i] = Message{Role: m.GetRole(), Content: m.GetContent(), Name: m.GetName(),
			ToolCallID: m.GetToolCallId(), ReasoningContent: m.GetReasoningContent()}
		for _, c := range m.GetToolCalls() {
			chat.Messages[i].ToolCalls = append(chat.Messages[i].ToolCalls,
				ToolCall{ID: c.GetId(), Type: c.GetType(), Name: c.GetName(), Arguments: c.GetArguments()})
		}
	}
	return chat
}

// generate forwards req with ids as its prompt (field names it for a
// length refusal), detokenizing the output and matching stop strings; rs
// is the stream it continues (zero: none), whose output ends ids. An
// engine's error comes back with the text the stop strings held
// (HeldText).
func (e *Engine) generate(ctx context.Context, req sdk.GenerateRequest, ids []uint32, field string, rs resumed, send func(sdk.Chunk) error) (sdk.Result, error) {
	promptLen := uint32(len(ids))
	if e.maxLen > 0 {
		switch {
		case promptLen >= e.maxLen:
			return sdk.Result{}, workerapi.ContextLengthError(field, e.maxLen, promptLen, req.MaxTokens)
		case req.MaxTokens > e.maxLen-promptLen:
			return sdk.Result{}, workerapi.ContextLengthError("stopping.max_tokens", e.maxLen, promptLen, req.MaxTokens)
		case req.MaxTokens == 0:
			// The default is the rest of the model's context, as
			// OpenAI's and vLLM's, not the engine's (vLLM's is 20
			// tokens). Less one: SGLang refuses a prompt and
			// max_new_tokens that reach its context length (vLLM takes
			// them), so that is the most every engine takes.
			req.MaxTokens = max(e.maxLen-promptLen-1, 1)
		}
	}
	// vigil matches stop strings itself: the engine would match them on
	// its own text, which a token-only engine does not have.
	stops := req.Stop
	req.TokenIDs, req.Text, req.Stop = ids, "", nil
	keep := e.keep(field == promptMessages || rs.chat)
	out := &detokenizer{dec: e.tok.NewDecoder(ids, keep), stops: stopstring.New(stops), awaitPrompt: req.Logprobs != nil && req.Logprobs.Prompt}
	// The other worker's held text is held again, ahead of the new text:
	// a stop string's possible start, it emits nothing yet.
	out.stops.Push(rs.held)
	out.lp.emitted = -len(rs.held) // its bytes are emitted, never decoded here
	res, err := e.engine.Generate(ctx, req, func(c sdk.Chunk) error { return out.send(c, send) })
	switch {
	case out.stopped && ctx.Err() == nil:
		// The engine's result is lost with its stream; ours has the
		// same prompt.
		return sdk.Result{FinishReason: sdk.FinishStop, PromptTokens: promptLen, CompletionTokens: out.sent}, nil
	case err != nil:
		return res, &heldError{err: err, held: out.stops.Held()}
	}
	tail, stopped, lps := out.flush()
	if tail != "" || len(lps) > 0 {
		if err := send(sdk.Chunk{Text: tail, Logprobs: lps}); err != nil {
			return res, err
		}
	}
	if stopped {
		res.FinishReason = sdk.FinishStop
	}
	return res, nil
}

// ErrStopString ends the engine's stream once a stop string matched.
var ErrStopString = errors.New("stop string matched")

// detokenizer is one request's output as vigil's own text: decoded
// incrementally and cut at the first stop string. With logprobs, each
// token's goes out with the chunk that emits the token's text: text held
// back (a stop string's possible start, a character cut across tokens)
// holds its tokens' logprobs too, and the tokens a stop string cuts lose
// theirs.
type detokenizer struct {
	dec     Decoder
	stops   *stopstring.Matcher
	stopped bool
	sent    uint32 // token ids sent on
	lp      heldLogprobs
	// awaitPrompt: the prompt's logprobs are asked for and have not come.
	// SGLang and TensorRT-LLM give them with their last output, so a stop
	// string does not end the engine's stream before they come: the
	// output after it is dropped.
	awaitPrompt bool
}

// send sends c on as vigil's text, the ids up to a stop string's end;
// once one matched, it fails, so that the engine's stream ends and the
// adapter aborts the engine request.
func (d *detokenizer) send(c sdk.Chunk, send func(sdk.Chunk) error) error {
	ids, text := d.next(c.TokenIDs, c.Logprobs)
	d.sent += uint32(len(ids))
	if c.PromptLogprobs != nil {
		d.awaitPrompt = false
	}
	if err := send(sdk.Chunk{TokenIDs: ids, Text: text, Logprobs: d.lp.release(d.stopped), PromptLogprobs: c.PromptLogprobs}); err != nil {
		return err
	}
	if d.stopped && !d.awaitPrompt {
		return ErrStopString
	}
	return nil
}

// next returns the text ids complete that can be emitted now, and ids up
// to the one that completed a stop string, if one did: chunks merged on
// the way hold tokens generated after it, which do not count. lps are
// the ids' logprobs, none without logprobs.
func (d *detokenizer) next(ids []uint32, lps []sdk.TokenLogprob) ([]uint32, string) {
	if d.stopped {
		return nil, ""
	}
	var text strings.Builder
	for i := range ids {
		piece := d.dec.Next(ids[i : i+1])
		if i < len(lps) {
			d.lp.add(lps[i], len(piece))
		}
		emit, stopped := d.stops.Push(piece)
		d.lp.emitted += len(emit)
		text.WriteString(emit)
		if stopped {
			d.stopped = true
			return ids[:i+1], text.String()
		}
	}
	return ids, text.String()
}

// flush returns the text held back at the end of the output, whether a
// stop string matched in it, and the logprobs of its tokens.
func (d *detokenizer) flush() (string, bool, []sdk.TokenLogprob) {
	piece := d.dec.Flush()
	d.lp.decoded += len(piece)
	d.lp.ended()
	text, stopped := d.stops.Push(piece)
	if !stopped {
		text += d.stops.Flush()
	}
	d.lp.emitted += len(text)
	d.stopped = stopped
	if !stopped {
		d.lp.emitted = d.lp.decoded
	}
	return text, stopped, d.lp.release(true)
}

// heldLogprobs are the logprobs of tokens whose text is not all emitted
// yet, with where the text of each lies in the decoded output (bytes).
type heldLogprobs struct {
	held             []heldLogprob
	decoded, emitted int // bytes of text decoded, and emitted past the stop strings
}

type heldLogprob struct {
	lp         sdk.TokenLogprob
	start, end int // end -1: its text is not decoded yet (part of a character)
}

// add holds lp, of a token whose piece of decoded text has n bytes: a
// token with none ends where the next text does (a character's bytes).
func (h *heldLogprobs) add(lp sdk.TokenLogprob, n int) {
	h.held = append(h.held, heldLogprob{lp: lp, start: h.decoded, end: -1})
	if n == 0 {
		return
	}
	h.decoded += n
	h.ended()
}

// ended sets the end of the tokens whose text the decoded text now holds.
func (h *heldLogprobs) ended() {
	for i := len(h.held) - 1; i >= 0 && h.held[i].end < 0; i-- {
		h.held[i].end = h.decoded
	}
}

// release returns the logprobs of the tokens whose text is emitted; last
// (a stop string matched, or the output ended) releases those of every
// token with any text emitted and drops the rest.
func (h *heldLogprobs) release(last bool) []sdk.TokenLogprob {
	n := 0
	for n < len(h.held) && h.held[n].end >= 0 && (h.held[n].end <= h.emitted || last && h.held[n].start < h.emitted) {
		n++
	}
	if n == 0 {
		if last {
			h.held = nil
		}
		return nil
	}
	out := make([]sdk.TokenLogprob, n)
	for i := range n {
		out[i] = h.held[i].lp
	}
	h.held = h.held[n:]
	if last {
		h.held = nil
	}
	return out
}
