package discovery

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MetaCaps is the metadata key of a worker's Capabilities: what it
// accepts beyond the basic request, so that a router sends a request only
// to workers of its model that take it (docs/worker-api.md,
// "Capabilities"). Added after v0.1.0: optional to readers, and a worker
// that does not publish it (or publishes "") is taken to accept
// LegacyCapabilities.
const MetaCaps = "caps"

// The capability names of this release, each for the request parameter
// of the same name in vigil.worker.v1 (the OpenAI name where there is one).
// Every worker accepts temperature, top_p, max_tokens and stop_token_ids:
// they have no name here. A name from a newer worker is kept and matched
// like these.
const (
	CapTopK              = "top_k"
	CapMinP              = "min_p"
	CapSeed              = "seed"
	CapPresencePenalty   = "presence_penalty"
	CapFrequencyPenalty  = "frequency_penalty"
	CapRepetitionPenalty = "repetition_penalty"
	CapLogitBias         = "logit_bias"
	CapStop              = "stop" // stop strings
	CapMinTokens         = "min_tokens"
	CapIgnoreEOS         = "ignore_eos"
	// CapN: n > 1; its value is the largest n, 0 none beyond the worker's
	// limits.
	CapN              = "n"
	CapJSONObject     = "json_object"
	CapJSONSchema     = "json_schema"
	CapRegex          = "regex"
	CapChoice         = "choice"
	CapGrammarEBNF    = "grammar.ebnf" // a grammar's dialect follows the dot
	CapGrammarLark    = "grammar.lark"
	CapStructuralTag  = "structural_tag"
	CapLogprobs       = "logprobs"        // value: most top alternatives
	CapPromptLogprobs = "prompt_logprobs" // value: most top alternatives
	// CapPromptTokenIDs: return_prompt (completions' echo, migration).
	CapPromptTokenIDs      = "prompt_token_ids"
	CapChatTemplateKwargs  = "chat_template_kwargs"
	CapTools               = "tools"
	CapReasoning           = "reasoning" // a reasoning parser is on
	CapTokenize            = "tokenize"  // the Tokenize and Detokenize RPCs
	CapEmbed               = "embed"     // an embedding model: the Embed RPC
	CapResume              = "resume"    // GenerateRequest.resume
	capNone                = "none"      // the encoding of a stated empty set
	capSeparator, capValue = ",", "="
)

// LegacyCapabilities is what a worker that publishes no capabilities is
// taken to accept: vigil.worker.v1's fields of v0.1.0, which such a worker
// refuses itself where its engine lacks one (INVALID_ARGUMENT naming it),
// as before.
var LegacyCapabilities = mustCapabilities(
	Capability{Name: CapTopK}, Capability{Name: CapMinP}, Capability{Name: CapSeed},
	Capability{Name: CapStop}, Capability{Name: CapMinTokens}, Capability{Name: CapIgnoreEOS})

// capName is a capability's name: lower case, digits, underscores, parts
// joined by dots.
var capName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$`)

// Capability is one thing a worker accepts: a name and, for the names that
// take a number, its limit (0: none, or no number).
type Capability struct {
	Name  string
	Value uint32
}

func (c Capability) String() string {
	if c.Value == 0 {
		return c.Name
	}
	return c.Name + capValue + strconv.FormatUint(uint64(c.Value), 10)
}

// Capabilities is the set a worker publishes under MetaCaps. It is held
// in its encoding, so that it compares with ==, as Registration does. The
// zero value is "not stated" (an older worker): Missing then reads
// LegacyCapabilities.
//
// The encoding is the items sorted by name, comma-separated, each a name
// or name=number (decimal): "json_schema,logprobs=20,seed". A stated empty
// set is "none".
type Capabilities struct{ enc string }

// NewCapabilities returns the set of items. It refuses a malformed name,
// a name given twice, and a set whose encoding is over MaxMetaValue bytes
// (the registries' limit), naming the item or the length.
func NewCapabilities(items ...Capability) (Capabilities, error) {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b Capability) int { return cmp.Compare(a.Name, b.Name) })
	parts := make([]string, len(items))
	for i, it := range items {
		if !capName.MatchString(it.Name) || it.Name == capNone {
			return Capabilities{}, fmt.Errorf("capability %q: a name is lower-case letters, digits and underscores, parts joined by dots, and not %q", it.Name, capNone)
		}
		if i > 0 && items[i-1].Name == it.Name {
			return Capabilities{}, fmt.Errorf("capability %q: given twice", it.Name)
		}
		parts[i] = it.String()
	}
	enc := strings.Join(parts, capSeparator)
	if enc == "" {
		enc = capNone
	}
	if len(enc) > MaxMetaValue {
		return Capabilities{}, fmt.Errorf("capabilities: %d bytes encoded, over the %d a registry takes", len(enc), MaxMetaValue)
	}
	return Capabilities{enc: enc}, nil
}

func mustCapabilities(items ...Capability) Capabilities {
	c, err := NewCapabilities(items...)
	if err != nil {
		panic(err)
	}
	return c
}

// ParseCapabilities reads a MetaCaps value. It is lenient, as a reader
// must be of newer writers: an item it cannot read (another syntax, a
// number over 32 bits) is left out, and a name given twice keeps its
// first value. "" is the zero Capabilities: not stated.
func ParseCapabilities(s string) Capabilities {
	if s == "" {
		return Capabilities{}
	}
	var items []Capability
	for part := range strings.SplitSeq(s, capSeparator) {
		name, num, hasNum := strings.Cut(part, capValue)
		it := Capability{Name: name}
		if hasNum {
			v, err := strconv.ParseUint(num, 10, 32)
			if err != nil {
				continue
			}
			it.Value = uint32(v)
		}
		if !capName.MatchString(name) || name == capNone || slices.ContainsFunc(items, func(o Capability) bool { return o.Name == name }) {
			continue
		}
		items = append(items, it)
	}
	c, err := NewCapabilities(items...)
	if err != nil { // over MaxMetaValue: a registry would not have held it
		return Capabilities{}
	}
	return c
}

// String returns the encoding, the MetaCaps value: "" when not stated.
func (c Capabilities) String() string { return c.enc }

// Equal reports whether c and o are the same set (as ==), for go-cmp,
// which compares Registrations with it.
func (c Capabilities) Equal(o Capabilities) bool { return c == o }

// Stated reports whether the worker published its capabilities.
func (c Capabilities) Stated() bool { return c.enc != "" }

// Items returns the stated items, sorted by name; nil when not stated or
// empty.
func (c Capabilities) Items() []Capability {
	if c.enc == "" || c.enc == capNone {
		return nil
	}
	var items []Capability
	for part := range strings.SplitSeq(c.enc, capSeparator) {
		name, num, _ := strings.Cut(part, capValue)
		v, _ := strconv.ParseUint(num, 10, 32) // the encoding is ours
		items = append(items, Capability{Name: name, Value: uint32(v)})
	}
	return items
}

// Lookup returns the item of that name in the set a router matches
// against (LegacyCapabilities when not stated).
func (c Capabilities) Lookup(name string) (Capability, bool) {
	if !c.Stated() {
		c = LegacyCapabilities
	}
	for _, it := range c.Items() {
		if it.Name == name {
			return it, true
		}
	}
	return Capability{}, false
}

// Need is one thing a request asks of a worker: the capability Name, and,
// for a name with a number, at least AtLeast (top_logprobs 5 needs
// logprobs of 5 or more; 0 asks for none).
type Need struct {
	Name    string
	AtLeast uint32
}

// Missing returns the first of needs, in their order, that c does not
// meet, so that a router's 400 names that parameter; false when c meets
// them all. A capability with the value 0 has no limit.
func (c Capabilities) Missing(needs ...Need) (Need, bool) {
	for _, n := range needs {
		it, ok := c.Lookup(n.Name)
		if !ok || (it.Value != 0 && n.AtLeast > it.Value) {
			return n, true
		}
	}
	return Need{}, false
}
