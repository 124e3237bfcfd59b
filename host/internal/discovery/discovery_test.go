package discovery_test

import (
	"bytes"
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
			"engine": "", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "text,token_ids", "max_model_len": "0", "owner": ""}},
		"full": {discovery.Registration{Service: "llm", WorkerID: "w1", Address: "10.0.0.1", Port: 8470,
			Engine: "vllm", Model: "m", ModelID: "org/m", InstanceID: "i1", Owner: "tok", MaxModelLen: 4096},
			map[string]string{"engine": "vllm", "model": "m", "model_id": "org/m", "instance_id": "i1", "worker_id": "w1", "prompts": "text,token_ids", "max_model_len": "4096", "owner": "tok"}},
		"token ids only": {discovery.Registration{Engine: "sglang", TokensOnly: true}, map[string]string{
			"engine": "sglang", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "token_ids", "max_model_len": "0", "owner": ""}},
		"token ids and chat": {discovery.Registration{Engine: "sglang", TokensOnly: true, Chat: true}, map[string]string{
			"engine": "sglang", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "token_ids,messages", "max_model_len": "0", "owner": ""}},
		"text and chat": {discovery.Registration{Engine: "vllm", Chat: true}, map[string]string{
			"engine": "vllm", "model": "", "model_id": "", "instance_id": "", "worker_id": "", "prompts": "text,token_ids,messages", "max_model_len": "0", "owner": ""}},
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
			if diff := cmp.Diff(want, discovery.FromMeta(meta)); diff != "" {
				t.Errorf("FromMeta(Meta) (-want +got):\n%s", diff)
			}
		})
	}
	if got := discovery.FromMeta(nil); got != (discovery.Registration{}) {
		t.Errorf("FromMeta(nil) = %+v, want the zero Registration", got)
	}
}

// TestPromptsMeta: a worker takes text unless its prompts say otherwise;
// workers of older vigils published none and served vLLM, which takes text.
func TestPromptsMeta(t *testing.T) {
	t.Parallel()
	for prompts, tokensOnly := range map[string]bool{
		"":                false,
		"text,token_ids":  false,
		"token_ids,text":  false,
		"token_ids":       true,
		"token_ids,audio": true,
	} {
		if got := discovery.FromMeta(map[string]string{"prompts": prompts}).TokensOnly; got != tokensOnly {
			t.Errorf("FromMeta(prompts %q).TokensOnly = %v, want %v", prompts, got, tokensOnly)
		}
	}
	// Chat only where listed: older vigils took no messages.
	for prompts, chat := range map[string]bool{
		"":                        false,
		"text,token_ids":          false,
		"token_ids,messages":      true,
		"text,token_ids,messages": true,
	} {
		if got := discovery.FromMeta(map[string]string{"prompts": prompts}).Chat; got != chat {
			t.Errorf("FromMeta(prompts %q).Chat = %v, want %v", prompts, got, chat)
		}
	}
}
