package discovery_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// mustCaps is NewCapabilities for a test.
func mustCaps(t *testing.T, items ...discovery.Capability) discovery.Capabilities {
	t.Helper()
	c, err := discovery.NewCapabilities(items...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCapabilitiesEncoding: a worker's capabilities are published as one
// metadata value, sorted, so that one set always gives the same value
// (a registry rewrite does not look like a change), and read back whole.
func TestCapabilitiesEncoding(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		items []discovery.Capability
		want  string
	}{
		"none stated": {nil, "none"},
		"one":         {[]discovery.Capability{{Name: "seed"}}, "seed"},
		"sorted, with numbers": {[]discovery.Capability{{Name: "seed"}, {Name: "logprobs", Value: 20}, {Name: "grammar.ebnf"}, {Name: "n", Value: 128}},
			"grammar.ebnf,logprobs=20,n=128,seed"},
		"a newer worker's name": {[]discovery.Capability{{Name: "json_schema"}, {Name: "audio.wav"}}, "audio.wav,json_schema"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := discovery.NewCapabilities(tc.items...)
			if err != nil {
				t.Fatalf("NewCapabilities: %v", err)
			}
			if got := c.String(); got != tc.want {
				t.Errorf("encoding %q, want %q", got, tc.want)
			}
			// Through the metadata, as every backend carries it.
			r, err := discovery.FromMeta(withMeta(discovery.MetaCaps, c.String()))
			if err != nil {
				t.Fatalf("FromMeta: %v", err)
			}
			if r.Caps != c || !r.Caps.Stated() {
				t.Errorf("FromMeta Caps %q (stated %v), want %q, stated", r.Caps, r.Caps.Stated(), c)
			}
		})
	}
}

// TestNewCapabilitiesRefuses: what a worker cannot publish is refused,
// naming the item, before it reaches a registry.
func TestNewCapabilitiesRefuses(t *testing.T) {
	t.Parallel()
	long := make([]discovery.Capability, 60)
	for i := range long {
		long[i] = discovery.Capability{Name: "capability_number_" + strings.Repeat("x", i/10) + string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	for name, tc := range map[string]struct {
		items []discovery.Capability
		want  string
	}{
		"upper case": {[]discovery.Capability{{Name: "Seed"}}, `capability "Seed": a name is lower-case`},
		"a comma":    {[]discovery.Capability{{Name: "a,b"}}, `capability "a,b"`},
		"empty name": {[]discovery.Capability{{Name: ""}}, `capability ""`},
		"reserved":   {[]discovery.Capability{{Name: "none"}}, `capability "none"`},
		"twice":      {[]discovery.Capability{{Name: "seed"}, {Name: "seed", Value: 1}}, `capability "seed": given twice`},
		"too long":   {long, "over the 512 a registry takes"},
	} {
		if c, err := discovery.NewCapabilities(tc.items...); err == nil || !strings.Contains(err.Error(), tc.want) || c.Stated() {
			t.Errorf("%s: NewCapabilities = %q, %v; want the zero set and an error containing %q", name, c, err, tc.want)
		}
	}
}

// TestParseCapabilitiesLenient: a router reads what a newer worker
// publishes, leaving out only the items it cannot read, and takes a worker
// that publishes nothing (one release older) as LegacyCapabilities.
func TestParseCapabilitiesLenient(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                          "",
		"none":                      "none",
		"seed":                      "seed",
		"seed,json_schema":          "json_schema,seed",
		"seed,logprobs=x,n=4":       "n=4,seed",
		"seed,n=99999999999":        "seed",
		"seed,Bad,a b,,x=1=2":       "seed",
		"seed,seed=3":               "seed",
		"logprobs=20,future.thing":  "future.thing,logprobs=20",
		"none,seed":                 "seed",
		",":                         "none",
		"json_object,grammar.lark=": "json_object",
	} {
		if got := discovery.ParseCapabilities(in).String(); got != want {
			t.Errorf("ParseCapabilities(%q) = %q, want %q", in, got, want)
		}
	}
	old := discovery.Registration{WorkerID: "w1", Owner: "tok"}.Meta()
	delete(old, discovery.MetaCaps)
	r, err := discovery.FromMeta(old)
	if err != nil || r.Caps.Stated() {
		t.Fatalf("FromMeta(no caps) = Caps %q, %v; want not stated, nil", r.Caps, err)
	}
	if diff := cmp.Diff(discovery.LegacyCapabilities.Items(), legacyItems(r.Caps)); diff != "" {
		t.Errorf("a worker without caps (-LegacyCapabilities +read):\n%s", diff)
	}
}

// legacyItems lists what Lookup finds in c of LegacyCapabilities' names.
func legacyItems(c discovery.Capabilities) []discovery.Capability {
	var out []discovery.Capability
	for _, it := range discovery.LegacyCapabilities.Items() {
		if got, ok := c.Lookup(it.Name); ok {
			out = append(out, got)
		}
	}
	return out
}

// TestCapabilitiesMissing: the router sends a request only to a worker
// that meets all its needs, and names the first unmet one in its 400.
func TestCapabilitiesMissing(t *testing.T) {
	t.Parallel()
	vllm := mustCaps(t, discovery.Capability{Name: discovery.CapSeed}, discovery.Capability{Name: discovery.CapLogitBias},
		discovery.Capability{Name: discovery.CapLogprobs, Value: 20}, discovery.Capability{Name: discovery.CapN})
	sglang := mustCaps(t, discovery.Capability{Name: discovery.CapSeed}, discovery.Capability{Name: discovery.CapJSONSchema})
	none := mustCaps(t)
	need := func(name string, n uint32) discovery.Need { return discovery.Need{Name: name, AtLeast: n} }
	for name, tc := range map[string]struct {
		caps  discovery.Capabilities
		needs []discovery.Need
		want  *discovery.Need
	}{
		"nothing needed":          {none, nil, nil},
		"met":                     {vllm, []discovery.Need{need("seed", 0), need("logit_bias", 0)}, nil},
		"first unmet named":       {sglang, []discovery.Need{need("seed", 0), need("logit_bias", 0), need("regex", 0)}, &discovery.Need{Name: "logit_bias"}},
		"within the limit":        {vllm, []discovery.Need{need("logprobs", 20)}, nil},
		"over the limit":          {vllm, []discovery.Need{need("logprobs", 21)}, &discovery.Need{Name: "logprobs", AtLeast: 21}},
		"no number, no limit":     {vllm, []discovery.Need{need("n", 1000)}, nil},
		"stated empty":            {none, []discovery.Need{need("seed", 0)}, &discovery.Need{Name: "seed"}},
		"not stated: legacy":      {discovery.Capabilities{}, []discovery.Need{need("seed", 0), need("min_p", 0), need("stop", 0)}, nil},
		"not stated: nothing new": {discovery.Capabilities{}, []discovery.Need{need("seed", 0), need("json_schema", 0)}, &discovery.Need{Name: "json_schema"}},
	} {
		got, missing := tc.caps.Missing(tc.needs...)
		if (tc.want == nil) == missing || (tc.want != nil && got != *tc.want) {
			t.Errorf("%s: %q.Missing(%v) = %v, %v; want %v", name, tc.caps, tc.needs, got, missing, tc.want)
		}
	}
}

// TestCapabilitiesFit: every capability of this release, the numbered ones
// with the largest numbers, fits one metadata value with room for a third
// more names.
func TestCapabilitiesFit(t *testing.T) {
	t.Parallel()
	var items []discovery.Capability
	for _, name := range []string{discovery.CapTopK, discovery.CapMinP, discovery.CapSeed, discovery.CapPresencePenalty,
		discovery.CapFrequencyPenalty, discovery.CapRepetitionPenalty, discovery.CapLogitBias, discovery.CapStop,
		discovery.CapMinTokens, discovery.CapIgnoreEOS, discovery.CapN, discovery.CapJSONObject, discovery.CapJSONSchema,
		discovery.CapRegex, discovery.CapChoice, discovery.CapGrammarEBNF, discovery.CapGrammarLark, discovery.CapStructuralTag,
		discovery.CapLogprobs, discovery.CapPromptLogprobs, discovery.CapPromptTokenIDs, discovery.CapChatTemplateKwargs,
		discovery.CapTools, discovery.CapReasoning, discovery.CapTokenize, discovery.CapEmbed, discovery.CapResume} {
		it := discovery.Capability{Name: name}
		if name == discovery.CapN || name == discovery.CapLogprobs || name == discovery.CapPromptLogprobs {
			it.Value = 4294967295
		}
		items = append(items, it)
	}
	c := mustCaps(t, items...)
	t.Logf("every capability: %d bytes: %s", len(c.String()), c)
	if n := len(c.String()); n > discovery.MaxMetaValue*3/4 {
		t.Errorf("every capability is %d bytes encoded, over 3/4 of the %d a value may have: shorten names", n, discovery.MaxMetaValue)
	}
}
