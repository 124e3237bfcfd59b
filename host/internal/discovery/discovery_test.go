package discovery_test

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

// The table of metadata keys in docs/operating.md lists MetaKeys, in
// order, and MetaKeys is every key Meta publishes.
func TestMetaKeysInDocs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Discovery metadata\n")
	if !ok {
		t.Fatal("docs/operating.md has no section ## Discovery metadata")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var inDocs []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		inDocs = append(inDocs, m[1])
	}
	if diff := cmp.Diff(discovery.MetaKeys, inDocs); diff != "" {
		t.Errorf("docs/operating.md table keys (-MetaKeys +docs):\n%s", diff)
	}
	var published []string
	for k := range (discovery.Registration{}).Meta() {
		published = append(published, k)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(discovery.MetaKeys)), slices.Sorted(slices.Values(published))); diff != "" {
		t.Errorf("Meta keys (-MetaKeys +Meta):\n%s", diff)
	}
}

func TestOnChange(t *testing.T) {
	t.Parallel()
	a := discovery.Registration{WorkerID: "a", Address: "10.0.0.1", Port: 8470, Model: "m"}
	b := discovery.Registration{WorkerID: "b", Address: "10.0.0.2", Port: 8470, Model: "m"}
	noHost, noPort, badPort := a, b, b
	noHost.Address, noPort.Port, badPort.Port = "", 0, 65536
	var got [][]discovery.Registration
	changed := discovery.OnChange(func(rs []discovery.Registration) { got = append(got, slices.Clone(rs)) })

	// A story of reads, each with the sets it should pass on.
	for _, step := range []struct {
		name string
		read []discovery.Registration
		want [][]discovery.Registration
	}{
		{"first, empty: passes", nil, [][]discovery.Registration{{}}},
		{"still empty", []discovery.Registration{}, nil},
		{"unusable only: still empty", []discovery.Registration{noHost, noPort, badPort}, nil},
		{"two, sorted", []discovery.Registration{b, a}, [][]discovery.Registration{{a, b}}},
		{"same set, other order", []discovery.Registration{a, b, noHost}, nil},
		{"one left", []discovery.Registration{b}, [][]discovery.Registration{{b}}},
	} {
		got = nil
		changed(step.read)
		if diff := cmp.Diff(step.want, got, cmp.Comparer(func(x, y []discovery.Registration) bool {
			return slices.Equal(x, y)
		})); diff != "" {
			t.Errorf("%s: sets passed on (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestFailuresLogFirstAndEveryTenth(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var f discovery.Failures
	f.Recover(log, "recovered") // no failures yet: nothing to log
	for range 25 {
		f.Fail(log, "failed", "backend", "x")
	}
	f.Recover(log, "recovered")
	f.Recover(log, "recovered")
	f.Fail(log, "failed")

	var got []string
	for l := range strings.Lines(buf.String()) {
		_, msg, _ := strings.Cut(l, "] ")
		got = append(got, strings.TrimSpace(msg))
	}
	want := []string{
		"failed: backend=x failures=1",
		"failed: backend=x failures=11",
		"failed: backend=x failures=21",
		"recovered: failures=25",
		"failed: failures=1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestMeta(t *testing.T) {
	t.Parallel()
	testCases := map[string]struct {
		r    discovery.Registration
		want map[string]string
	}{
		"zero": {discovery.Registration{}, map[string]string{
			"engine": "", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "text,token_ids", "max_model_len": "0", "caps": "", "owner": ""}},
		"full": {discovery.Registration{Service: "llm", WorkerID: "w1", Address: "10.0.0.1", Port: 8470,
			Engine: "vllm", Model: "m", ModelID: "org/m", InstanceID: "i1", Owner: "tok", MaxModelLen: 4096},
			map[string]string{"engine": "vllm", "model": "m", "model_id": "org/m", "instance_id": "i1", "worker_id": "w1", "prompts": "text,token_ids", "max_model_len": "4096", "caps": "", "owner": "tok"}},
		"token ids only": {discovery.Registration{Engine: "sglang", TokensOnly: true}, map[string]string{
			"engine": "sglang", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "token_ids", "max_model_len": "0", "caps": "", "owner": ""}},
		"token ids and chat": {discovery.Registration{Engine: "sglang", TokensOnly: true, Chat: true}, map[string]string{
			"engine": "sglang", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "token_ids,messages", "max_model_len": "0", "caps": "", "owner": ""}},
		"capabilities": {discovery.Registration{Engine: "vllm", Caps: mustCaps(t, discovery.Capability{Name: "seed"}, discovery.Capability{Name: "logprobs", Value: 20})},
			map[string]string{"engine": "vllm", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "text,token_ids", "max_model_len": "0", "caps": "logprobs=20,seed", "owner": ""}},
		"text and chat": {discovery.Registration{Engine: "vllm", Chat: true}, map[string]string{
			"engine": "vllm", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "text,token_ids,messages", "max_model_len": "0", "caps": "", "owner": ""}},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			meta := tc.r.Meta()
			if diff := cmp.Diff(tc.want, meta); diff != "" {
				t.Errorf("Meta (-want +got):\n%s", diff)
			}
			// FromMeta reads back all but what backends keep outside meta.
			want := tc.r
			want.Service, want.Address, want.Port = "", "", 0
			got, err := discovery.FromMeta(meta)
			if err != nil {
				t.Fatalf("FromMeta(Meta): %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromMeta(Meta) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPromptsMeta: a worker takes text unless its prompts say otherwise,
// and chat messages only where listed.
func TestPromptsMeta(t *testing.T) {
	t.Parallel()
	for prompts, want := range map[string]struct{ tokensOnly, chat bool }{
		"text,token_ids":          {false, false},
		"token_ids,text":          {false, false},
		"token_ids":               {true, false},
		"token_ids,audio":         {true, false},
		"text":                    {false, false},
		"token_ids,messages":      {true, true},
		"text,token_ids,messages": {false, true},
	} {
		r, err := discovery.FromMeta(withMeta(discovery.MetaPrompts, prompts))
		if err != nil || r.TokensOnly != want.tokensOnly || r.Chat != want.chat {
			t.Errorf("FromMeta(prompts %q) = TokensOnly %v, Chat %v, error %v; want %v, %v, nil",
				prompts, r.TokensOnly, r.Chat, err, want.tokensOnly, want.chat)
		}
	}
}

// withMeta is a current vigil's metadata with key set to value.
func withMeta(key, value string) map[string]string {
	meta := discovery.Registration{WorkerID: "w1", Owner: "tok"}.Meta()
	meta[key] = value
	return meta
}

// TestFromMetaRefuses: the metadata is compatible one release back and no
// further, so metadata that no current vigil publishes (a key missing, as
// from a vigil before v0.1.0, or prompts listing no kind a worker takes)
// is refused, naming what is wrong, not read with defaults.
func TestFromMetaRefuses(t *testing.T) {
	t.Parallel()
	without := func(keys ...string) map[string]string {
		meta := withMeta(discovery.MetaOwner, "tok")
		for _, k := range keys {
			delete(meta, k)
		}
		return meta
	}
	for name, tc := range map[string]struct {
		meta map[string]string
		want string
	}{
		"nil": {nil, "metadata lacks engine, model, model_id, instance_id, worker_id, prompts, max_model_len, owner, which every current vigil publishes"},
		"no prompts, no owner": {without(discovery.MetaPrompts, discovery.MetaOwner),
			"metadata lacks prompts, owner, which every current vigil publishes"},
		"no max_model_len": {without(discovery.MetaMaxModelLen), "metadata lacks max_model_len, which every current vigil publishes"},
		"empty prompts":    {withMeta(discovery.MetaPrompts, ""), `metadata prompts "" lists neither text nor token_ids`},
		"messages only":    {withMeta(discovery.MetaPrompts, "messages"), `metadata prompts "messages" lists neither text nor token_ids`},
	} {
		r, err := discovery.FromMeta(tc.meta)
		if err == nil || err.Error() != tc.want || r != (discovery.Registration{}) {
			t.Errorf("%s: FromMeta = %+v, %v; want the zero Registration and %q", name, r, err, tc.want)
		}
	}
}

// TestSkipsLogOncePerStay: a registration left out at every read is logged
// at its first read and again only when its reason changes or it comes
// back after a read without it.
func TestSkipsLogOncePerStay(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var s discovery.Skips
	noOwner, noPrompts := errors.New("no owner"), errors.New("no prompts")
	for _, read := range [][]error{{noOwner}, {noOwner}, {noPrompts}, {noPrompts}, {}, {noPrompts}} {
		for _, err := range read {
			s.Skip(log, "w1", err, "service", "llm")
		}
		s.Read()
	}
	var got []string
	for l := range strings.Lines(buf.String()) {
		_, msg, _ := strings.Cut(l, "] ")
		got = append(got, strings.TrimSpace(msg))
	}
	want := []string{
		`leaving out a registration that no current vigil wrote: service=llm id=w1 reason="no owner"`,
		`leaving out a registration that no current vigil wrote: service=llm id=w1 reason="no prompts"`,
		`leaving out a registration that no current vigil wrote: service=llm id=w1 reason="no prompts"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
