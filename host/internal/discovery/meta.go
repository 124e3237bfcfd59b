package discovery

import (
	"slices"
	"strconv"
	"strings"
)

// The metadata keys a worker is published under: Consul's service meta and
// the file record's "meta" hold them, and the Consul reader takes a
// worker's identity from them (FromMeta). The table "Discovery
// metadata" of docs/operating.md lists the same keys (TestMetaKeysInDocs). Consul refuses
// values longer than 512 bytes.
const (
	// MetaEngine is the engine name, e.g. "vllm"; Consul also has it as the
	// service's first tag.
	MetaEngine = "engine"
	// MetaModel is the served model name, the one requests name.
	MetaModel = "model"
	// MetaModelID is the engine's model id or path.
	MetaModelID = "model_id"
	// MetaInstanceID is the engine's lifetime id: a restarted engine has
	// another.
	MetaInstanceID = "instance_id"
	// MetaWorkerID is the worker id, stable across vigil restarts.
	MetaWorkerID = "worker_id"
	// MetaPrompts lists the prompt kinds the worker takes, comma-separated:
	// PromptText, PromptTokenIDs and PromptMessages. Absent means text and
	// token ids.
	MetaPrompts = "prompts"
	// MetaOwner is the owner token of the vigil run that registered the
	// worker (Registration.Owner): random per run, so that a vigil tells
	// its own registration from another's under the same worker id.
	MetaOwner = "owner"
	// MetaMaxModelLen is the model's maximum length in tokens (prompt plus
	// completion), decimal, as the engine reports it; 0 (or absent, from
	// older vigils) when unknown.
	MetaMaxModelLen = "max_model_len"
)

// The prompt kinds MetaPrompts lists.
const (
	PromptText     = "text"
	PromptTokenIDs = "token_ids"
	// PromptMessages: chat messages, which the worker renders with the
	// model's chat template (vigil.worker.v1 prompt.messages).
	PromptMessages = "messages"
)

// MetaKeys lists every metadata key, in the docs table's order.
var MetaKeys = []string{MetaEngine, MetaModel, MetaModelID, MetaInstanceID, MetaWorkerID, MetaPrompts, MetaMaxModelLen, MetaOwner}

// Meta returns the metadata every backend publishes for r.
func (r Registration) Meta() map[string]string {
	return map[string]string{
		MetaEngine:      r.Engine,
		MetaModel:       r.Model,
		MetaModelID:     r.ModelID,
		MetaInstanceID:  r.InstanceID,
		MetaWorkerID:    r.WorkerID,
		MetaPrompts:     r.prompts(),
		MetaMaxModelLen: strconv.FormatUint(uint64(r.MaxModelLen), 10),
		MetaOwner:       r.Owner,
	}
}

func (r Registration) prompts() string {
	kinds := PromptText + "," + PromptTokenIDs
	if r.TokensOnly {
		kinds = PromptTokenIDs
	}
	if r.Chat {
		kinds += "," + PromptMessages
	}
	return kinds
}

// FromMeta returns the registration whose Meta is meta, but for Service,
// Address and Port, which backends hold outside the metadata. Absent keys
// leave their fields empty.
func FromMeta(meta map[string]string) Registration {
	return Registration{
		Engine:      meta[MetaEngine],
		Model:       meta[MetaModel],
		ModelID:     meta[MetaModelID],
		InstanceID:  meta[MetaInstanceID],
		WorkerID:    meta[MetaWorkerID],
		TokensOnly:  tokensOnly(meta[MetaPrompts]),
		Chat:        hasPrompt(meta[MetaPrompts], PromptMessages),
		MaxModelLen: maxModelLen(meta[MetaMaxModelLen]),
		Owner:       meta[MetaOwner],
	}
}

// hasPrompt reads MetaPrompts: whether it lists kind.
func hasPrompt(prompts, kind string) bool {
	return slices.Contains(strings.Split(prompts, ","), kind)
}

// maxModelLen reads MetaMaxModelLen; absent or malformed is 0, unknown.
func maxModelLen(s string) uint32 {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// tokensOnly reads MetaPrompts: a list without PromptText; absent is both.
func tokensOnly(prompts string) bool {
	return prompts != "" && !slices.Contains(strings.Split(prompts, ","), PromptText)
}
