package sdk

import "context"

// Generator is the optional request-forwarding side of an adapter, for
// adapters that set Capabilities.Generate. Both methods are called only
// after a successful Start, concurrently with each other and with
// themselves.
type Generator interface {
	// Generate forwards req to the engine and calls send for each chunk of
	// new output (token ids or text), in order, from the calling goroutine;
	// it returns the final result, FinishStop or FinishLength, after the
	// last chunk, and never calls send after returning. An error before the
	// first send means nothing was generated: wrap ErrUnavailable when the
	// engine cannot take the request (it is not serving, or not ready),
	// ErrInvalidArgument (naming the field) when it rejects it, such as a
	// text prompt to an engine that takes token ids only. An error after
	// output wraps ErrUnavailable only when the engine cannot go on (it or
	// the connection to it was lost): the host then has the stream
	// continued on another worker. When ctx ends,
	// Generate aborts the engine-side request, so that the engine stops
	// generating, and returns ctx's error promptly. When send fails,
	// Generate aborts likewise and returns send's error.
	//
	// Across the plugin boundary, send queues the chunk for the next hop
	// and returns: chunks that wait while the next hop is busy go on as
	// one (token ids and text concatenated, in order), while a chunk sent
	// to an idle hop goes at once. So send may return the failure of an
	// earlier chunk, waits only while 64 KiB of output already waits, and
	// copies c's token ids, which the caller may reuse.
	Generate(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error)

	// Abort ends engine-side requests by id: a Generate forwarding one
	// returns soon after, with FinishCancelled or an error. Unknown ids are
	// ignored: Abort returns nil for them.
	Abort(ctx context.Context, requestIDs []string) error
}

// GenerateRequest is one request as the engine should see it.
type GenerateRequest struct {
	// RequestID is the engine-side id, unique per request.
	RequestID string
	// Text or TokenIDs is the prompt; exactly one is set.
	Text     string
	TokenIDs []uint32
	// Sampling; nil means the engine's default.
	Temperature *float32
	TopP        *float32
	TopK        *uint32
	Seed        *int64
	// MaxTokens is the most tokens to generate; 0 means the engine's
	// default.
	MaxTokens    uint32
	StopTokenIDs []uint32
	Stop         []string
	IgnoreEOS    bool
	// MinTokens is the fewest tokens to generate: stop tokens and the end
	// of sequence do not end the generation before it (stop strings are
	// matched after it as the engine does). 0 means none; the host passes
	// at most MaxTokens when that is set. Map it to the engine's own field
	// (vLLM min_new_tokens, SGLang min_new_tokens, TensorRT-LLM min_tokens).
	// A host never sends it to an adapter built with an sdk from before
	// it: the sdk lists the request fields it reads in the adapter's Info,
	// and the host refuses a request that sets another, naming the field.
	MinTokens uint32
	// MinP drops tokens whose probability is below MinP times the most
	// likely token's, in [0, 1]; 0 means off (all engines' default). An
	// engine without it must refuse a non-zero MinP with
	// ErrInvalidArgument naming min_p, not drop it.
	MinP float32

	// The fields below are set only when the adapter's Worker.Accepts
	// lists their capability names (docs/worker-api.md, "Capabilities"):
	// an adapter that does not list one never sees it set.

	// PresencePenalty and FrequencyPenalty are in [-2, 2]; 0 means none
	// ("presence_penalty", "frequency_penalty").
	PresencePenalty  float32
	FrequencyPenalty float32
	// RepetitionPenalty is > 0; nil or 1 means none ("repetition_penalty").
	RepetitionPenalty *float32
	// LogitBias adds a bias in [-100, 100] to a token id's logit
	// ("logit_bias"); nil means none.
	LogitBias map[uint32]float32
	// StructuredOutput constrains the output's form; nil means free.
	StructuredOutput *StructuredOutput
	// Logprobs asks for log probabilities ("logprobs=N",
	// "prompt_logprobs=N"); nil means none.
	Logprobs *Logprobs
}

// StructuredOutput is a constraint for the engine's guided decoding. The
// host sets only the kinds the adapter's Worker.Accepts lists: "json_object",
// "json_schema", "regex", "choice", "grammar.<dialect>", "structural_tag".
type StructuredOutput struct {
	Kind StructuredKind
	// Text is the JSON schema (StructuredJSONSchema, JSON text), the regular
	// expression (StructuredRegex), the grammar (StructuredGrammar) or the
	// structural tag (StructuredTag, JSON text as vLLM and SGLang take it).
	Text string
	// Choices are StructuredChoice's allowed outputs, at least one.
	Choices []string
	// Dialect is StructuredGrammar's, as the capability names it: "ebnf"
	// or "lark". The text is passed to the engine as it is.
	Dialect string
}

// StructuredKind is the kind of a StructuredOutput. The numbers match the
// field numbers of vigil.plugin.v1.StructuredOutput's oneof.
type StructuredKind int

// Kinds of structured output.
const (
	StructuredNone StructuredKind = iota
	// StructuredJSONObject: any JSON object.
	StructuredJSONObject
	// StructuredJSONSchema: JSON valid against the schema in Text.
	StructuredJSONSchema
	// StructuredRegex: text matching the regular expression in Text.
	StructuredRegex
	// StructuredChoice: exactly one of Choices.
	StructuredChoice
	// StructuredGrammar: text of the grammar in Text, in Dialect.
	StructuredGrammar
	// StructuredTag: vLLM's and SGLang's structural tag in Text.
	StructuredTag
)

// Chunk is new output: token ids and, when the engine detokenizes, their
// text.
type Chunk struct {
	TokenIDs []uint32
	Text     string
	// Logprobs, when the request asks (Logprobs.Output), has one entry per
	// token id, in order.
	Logprobs []TokenLogprob
	// PromptLogprobs, when the request asks (Logprobs.Prompt), has one
	// entry per prompt token, the first Unknown. It comes once, in any
	// chunk (one with no token ids is fine): when the engine gives it, at
	// its first or its last message.
	PromptLogprobs []TokenLogprob
}

// FinishReason says why a generation ended. The numbers match
// vigil.plugin.v1.FinishReason and vigil.worker.v1.FinishReason.
type FinishReason int

// Finish reasons.
const (
	FinishUnknown FinishReason = iota
	// FinishStop: a stop token or string, or end of sequence.
	FinishStop
	// FinishLength: max tokens or the model's length reached.
	FinishLength
	// FinishCancelled: aborted.
	FinishCancelled
	// FinishError: the engine failed.
	FinishError
)

func (f FinishReason) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	default:
		return "unknown"
	}
}

// Result ends a generation.
type Result struct {
	FinishReason FinishReason
	// PromptTokens and CompletionTokens count tokens, as the engine reports.
	PromptTokens     uint32
	CompletionTokens uint32
	// CachedTokens counts prompt tokens the engine served from its prefix
	// cache; 0 when it does not say.
	CachedTokens uint32
}
