package discovery

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The metadata keys a worker is published under: Consul's service meta and
// the file record's "meta" hold them, and the Consul reader takes a
// worker's identity from them (FromMeta). The table "Discovery
// metadata" of docs/operating.md lists the same keys (TestMetaKeysInDocs). Consul refuses
// values longer than 512 bytes.
//
// Every vigil publishes every key. The metadata is compatible one release
// back: a key added later is optional to readers for one release, and
// nothing is read from registrations older than that (FromMeta refuses
// them).
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
	// PromptText, PromptTokenIDs and PromptMessages; it lists text or
	// token ids, or both.
	MetaPrompts = "prompts"
	// MetaOwner is the owner token of the vigil run that registered the
	// worker (Registration.Owner): random per run, so that a vigil tells
	// its own registration from another's under the same worker id.
	MetaOwner = "owner"
	// MetaMaxModelLen is the model's maximum length in tokens (prompt plus
	// completion), decimal, as the engine reports it; 0 when unknown.
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
// Address and Port, which backends hold outside the metadata. It refuses
// metadata that no current vigil publishes: a key of MetaKeys missing, or
// prompts listing neither text nor token ids; readers leave such a
// registration out (Skips).
func FromMeta(meta map[string]string) (Registration, error) {
	var missing []string
	for _, k := range MetaKeys {
		if _, ok := meta[k]; !ok {
			missing = append(missing, k)
		}
	}
	if missing != nil {
		return Registration{}, fmt.Errorf("metadata lacks %s, which every current vigil publishes", strings.Join(missing, ", "))
	}
	prompts := meta[MetaPrompts]
	if !hasPrompt(prompts, PromptText) && !hasPrompt(prompts, PromptTokenIDs) {
		return Registration{}, fmt.Errorf("metadata %s %q lists neither %s nor %s", MetaPrompts, prompts, PromptText, PromptTokenIDs)
	}
	return Registration{
		Engine:      meta[MetaEngine],
		Model:       meta[MetaModel],
		ModelID:     meta[MetaModelID],
		InstanceID:  meta[MetaInstanceID],
		WorkerID:    meta[MetaWorkerID],
		TokensOnly:  !hasPrompt(prompts, PromptText),
		Chat:        hasPrompt(prompts, PromptMessages),
		MaxModelLen: maxModelLen(meta[MetaMaxModelLen]),
		Owner:       meta[MetaOwner],
	}, nil
}

// hasPrompt reads MetaPrompts: whether it lists kind.
func hasPrompt(prompts, kind string) bool {
	return slices.Contains(strings.Split(prompts, ","), kind)
}

// maxModelLen reads MetaMaxModelLen; malformed is 0, unknown.
func maxModelLen(s string) uint32 {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}
