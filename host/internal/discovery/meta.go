package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The metadata keys a worker is published under: Consul's service meta and
// the file record's "meta" hold them, and the Consul reader takes a
// worker's identity from them (FromMeta). The table "Discovery
// metadata" of docs/operating.md lists the same keys (TestMetaKeysInDocs). Every
// backend publishes values of at most MaxMetaValue bytes (Fit).
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
var MetaKeys = []string{MetaEngine, MetaModel, MetaModelID, MetaInstanceID, MetaWorkerID, MetaPrompts, MetaMaxModelLen, MetaCaps, MetaOwner}

// metaOptional are the keys of MetaKeys added in this release: optional to
// readers until the next, as workers one release older do not publish
// them.
var metaOptional = map[string]bool{MetaCaps: true}

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
		MetaCaps:        r.Caps.String(),
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
// metadata that no current vigil publishes: a key of MetaKeys missing (but
// for the ones added in this release, such as MetaCaps), or
// prompts listing neither text nor token ids; readers leave such a
// registration out (Skips).
func FromMeta(meta map[string]string) (Registration, error) {
	var missing []string
	for _, k := range MetaKeys {
		if _, ok := meta[k]; !ok && !metaOptional[k] {
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
		Caps:        ParseCapabilities(meta[MetaCaps]),
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

// Consul's limits on service meta (agent/structs validateMetaPair): at
// most 64 pairs, keys of at most 128 characters, values of at most 512
// bytes. A registration over them is refused with a 400, which no retry
// cures. MetaKeys fit the first two (TestMetaKeysFitConsul); Fit holds
// every backend's values to the third, so that a worker is published alike
// whatever the backend.
const (
	MaxMetaPairs  = 64
	MaxMetaKey    = 128
	MaxMetaValue  = 512
	hashSeparator = "#sha256:"
)

// MetaError is why a registration cannot be published: the value of Key,
// which the worker is found or routed by, is over MaxMetaValue and cannot
// be shortened. No retry will help.
type MetaError struct {
	Key   string
	Len   int
	Fixed string // what sets the value, for the message
}

func (e *MetaError) Error() string {
	return fmt.Sprintf("metadata %s is %d bytes long, over the %d bytes a registry takes (Consul's limit on a meta value); it cannot be shortened, as %s",
		e.Key, e.Len, MaxMetaValue, e.Fixed)
}

// Fit returns r with every metadata value within MaxMetaValue: model_id
// (informational) and instance_id (compared only for equality) are
// shortened, when over, to a prefix and the SHA-256 of the whole value,
// so that distinct values stay distinct and one value always gives the
// same; shortened lists the keys shortened. The values a worker is found
// or routed by (engine, model, worker_id) are never changed: over the
// limit, Fit returns a *MetaError naming the key.
func (r Registration) Fit() (fitted Registration, shortened []string, err error) {
	for _, v := range []struct{ key, val, fixed string }{
		{MetaEngine, r.Engine, "it names the engine (in Consul, the service's tag too)"},
		{MetaModel, r.Model, "requests name the model by it exactly: give a shorter --served-model-name"},
		{MetaWorkerID, r.WorkerID, "it identifies the worker: give a shorter --worker-id"},
	} {
		if len(v.val) > MaxMetaValue {
			return r, nil, &MetaError{Key: v.key, Len: len(v.val), Fixed: v.fixed}
		}
	}
	if len(r.ModelID) > MaxMetaValue {
		r.ModelID, shortened = shorten(r.ModelID), append(shortened, MetaModelID)
	}
	if len(r.InstanceID) > MaxMetaValue {
		r.InstanceID, shortened = shorten(r.InstanceID), append(shortened, MetaInstanceID)
	}
	return r, shortened, nil
}

// shorten returns v's first bytes, cut at a character boundary, and its
// SHA-256, in MaxMetaValue bytes at most: <prefix>#sha256:<64 hex digits>.
func shorten(v string) string {
	sum := sha256.Sum256([]byte(v))
	tail := hashSeparator + hex.EncodeToString(sum[:])
	n := MaxMetaValue - len(tail)
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n] + tail
}
