package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// tokenizerFamilies are the real models under tokenizer/testdata/models
// (make tokenizer-models): each runs behind vllm's mock, and llama3 behind
// every other engine's too.
var tokenizerFamilies = []string{"llama3", "qwen3", "gemma3", "llama2", "gpt4o"}

// familyReference is the tokenizer module's testdata/<family>.json (from
// transformers.js): texts[i] is inputs.json's texts[i].
type familyReference struct {
	Config struct {
		AddBOS  *bool   `json:"add_bos_token"`
		AddEOS  *bool   `json:"add_eos_token"`
		BOS     *uint32 `json:"bos_token_id"`
		EOS     *uint32 `json:"eos_token_id"`
		Rebuild bool    `json:"rebuilds_post_processor"`
	} `json:"config"`
	Texts []struct {
		Name          string   `json:"name"`
		IDs           []uint32 `json:"ids"`
		IDsSpecial    []uint32 `json:"ids_special"`
		SpecialPrefix []uint32 `json:"special_prefix"`
		SpecialSuffix []uint32 `json:"special_suffix"`
	} `json:"texts"`
	InContext []inContextRef `json:"in_context"`
	inputs    []string       // inputs.json's texts, in order
}

// inContextRef is a reference stream: output ids decoded after a prompt.
type inContextRef struct {
	Name      string   `json:"name"`
	Prompt    string   `json:"prompt"`
	PromptIDs []uint32 `json:"prompt_ids"`
	OutputIDs []uint32 `json:"output_ids"`
	Text      string   `json:"text"`
}

// moduleFixture returns the family's model directory and references; it
// skips without the model, failing instead when
// VIGIL_REQUIRE_TOKENIZER_MODELS is set (CI).
func moduleFixture(t *testing.T, family string) (string, *familyReference) {
	t.Helper()
	base, err := filepath.Abs(filepath.Join("..", "tokenizer", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "models", family)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("VIGIL_REQUIRE_TOKENIZER_MODELS") != "" {
			t.Fatalf("%s missing: run make tokenizer-models", dir)
		}
		t.Skipf("%s missing: run make tokenizer-models", dir)
	}
	ref := &familyReference{}
	var in struct {
		Texts []struct {
			Text string `json:"text"`
		} `json:"texts"`
	}
	readFixture(t, filepath.Join(base, family+".json"), ref)
	readFixture(t, filepath.Join(base, "inputs.json"), &in)
	if len(in.Texts) != len(ref.Texts) {
		t.Fatalf("%s: %d texts, inputs.json %d", family, len(ref.Texts), len(in.Texts))
	}
	for _, x := range in.Texts {
		ref.inputs = append(ref.inputs, x.Text)
	}
	return dir, ref
}

func readFixture(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// withSpecial is text name's input and its reference ids with the special
// tokens added, as tokenizer/reference_test.go reconstructs them: where
// transformers rebuilds the post-processor, add_bos_token/add_eos_token
// decide.
func (r *familyReference) withSpecial(t *testing.T, name string) (string, []uint32) {
	t.Helper()
	for i, x := range r.Texts {
		if x.Name != name {
			continue
		}
		want := x.IDsSpecial
		if want == nil {
			want = slices.Concat(x.SpecialPrefix, x.IDs, x.SpecialSuffix)
		}
		if r.Config.Rebuild {
			want = nil
			if r.Config.AddBOS != nil && *r.Config.AddBOS && r.Config.BOS != nil {
				want = append(want, *r.Config.BOS)
			}
			want = append(want, x.IDs...)
			if r.Config.AddEOS != nil && *r.Config.AddEOS && r.Config.EOS != nil {
				want = append(want, *r.Config.EOS)
			}
		}
		return r.inputs[i], want
	}
	t.Fatalf("no reference text %q", name)
	return "", nil
}

// engineNamed is the engine table's plain row for an engine.
func engineNamed(t *testing.T, name string) *engine {
	t.Helper()
	for _, e := range engines {
		if e.Name == name && e.Variant == "" {
			return e
		}
	}
	t.Fatalf("no engine row %s", name)
	return nil
}

// TestTokenizerFamilies: for each real tokenizer family, through vigil
// route to a worker started with --tokenizer-dir, a completion's text
// prompt reaches the engine as the reference ids with special tokens (a
// special-token look-alike and indented code among them), a chat as the
// reference ids of the template's rendering, and the streamed output is
// the reference decoding in the prompt's context. Every family runs on
// vllm's mock; llama3 on each other engine too.
func TestTokenizerFamilies(t *testing.T) {
	skipShort(t)
	t.Parallel()
	type run struct {
		e      *engine
		family string
	}
	var runs []run
	for _, f := range tokenizerFamilies {
		runs = append(runs, run{engineNamed(t, harness.VLLM.Name), f})
	}
	for _, name := range []string{harness.SGLang.Name, harness.TRTLLM.Name} {
		runs = append(runs, run{engineNamed(t, name), "llama3"})
	}
	// One service and one router for all: each worker serves a model
	// of its own, which the router routes by.
	c := consulFor(t)
	svc := uniqueService(t)
	base := "http://" + startRouter(t, c, svc, 0).HTTP
	for _, r := range runs {
		name := r.e.row() + "-" + r.family
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testTokenizerFamily(t, c, svc, base, r.e, r.family, path.Join(path.Dir(r.e.model), name))
		})
	}
}

func testTokenizerFamily(t *testing.T, c *consulAgent, svc, base string, e *engine, family, model string) {
	dir, ref := moduleFixture(t, family)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), Model: model, TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	// gemma3's 262k-token file loads for tens of seconds in a race build.
	v.waitLine("worker registered", 120*time.Second)
	waitRouterModel(t, base, model)
	// The output: indented code, decoded after its prompt.
	i := slices.IndexFunc(ref.InContext, func(x inContextRef) bool { return x.Name == "code" })
	if i < 0 {
		t.Fatal("no in-context reference \"code\"")
	}
	out := ref.InContext[i]
	m.post(t, "/script", map[string]any{"tokens": out.OutputIDs})

	for _, name := range []string{"code with indentation", "look-alike im_start", "look-alike inst", "multilingual"} {
		text, want := ref.withSpecial(t, name)
		code, _, resp := post(t, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d}`, model, text, len(out.OutputIDs)))
		if code != 200 {
			t.Fatalf("%s: got %d %s", name, code, resp)
		}
		if got := m.state(t).LastPrompt; !slices.Equal(got, want) {
			t.Errorf("%s: the engine got prompt ids\n%v\nwant the reference with special tokens\n%v", name, got, want)
		}
	}
	checkStreamInContext(t, m, base, model, out.Prompt, out.PromptIDs, out.Text)
	checkFamilyChat(t, m, base, model, family)
}

// checkStreamInContext: a streamed completion of prompt, the mock scripted
// with the reference output ids, streams the reference decoding in the
// prompt's context; the engine's prompt ends with the prompt's ids.
func checkStreamInContext(t *testing.T, m *mock, base, model, prompt string, promptIDs []uint32, want string) {
	t.Helper()
	code, _, resp := post(t, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":64,"stream":true}`, model, prompt))
	if code != 200 {
		t.Fatalf("stream: got %d %s", code, resp)
	}
	datas, done := sseData(resp)
	var text strings.Builder
	for _, d := range datas {
		var ev struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		for _, c := range ev.Choices {
			text.WriteString(c.Text)
		}
	}
	if !done {
		t.Errorf("no [DONE] in:\n%s", resp)
	}
	if text.String() != want {
		t.Errorf("streamed %q, want the reference decoding in context %q", text.String(), want)
	}
	if got := m.state(t).LastPrompt; !slices.Equal(got[max(0, len(got)-len(promptIDs)):], promptIDs) {
		t.Errorf("the engine got prompt ids %v, want them to end with %v", got, promptIDs)
	}
}

// checkFamilyChat: where the host's references hold the family's chat
// template renderings (host/internal/tokenizer/testdata), a chat reaches
// the engine as the reference ids.
func checkFamilyChat(t *testing.T, m *mock, base, model, family string) {
	t.Helper()
	file := filepath.Join("..", "host", "internal", "tokenizer", "testdata", family+".json")
	if _, err := os.Stat(file); err != nil {
		t.Logf("no chat references for %s (%s): chat not checked", family, file)
		return
	}
	var ref tokenizerReference
	readFixture(t, file, &ref)
	i := -1
	for j, ch := range ref.Chats {
		if ch.Name == "system user assistant user" && ch.AddGenerationPrompt && ch.Error == nil {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("%s: no reference chat \"system user assistant user\" with the generation prompt", file)
	}
	chat := ref.Chats[i]
	messages, err := json.Marshal(chat.Messages)
	if err != nil {
		t.Fatal(err)
	}
	code, _, resp := post(t, base+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":2}`, model, messages))
	if code != 200 {
		t.Fatalf("chat: got %d %s", code, resp)
	}
	if got := m.state(t).LastPrompt; !slices.Equal(got, chat.IDs) {
		t.Errorf("chat: the engine got prompt ids\n%v\nwant the reference ids of the template's rendering\n%v", got, chat.IDs)
	}
}

// waitRouterModel polls the router's GET /v1/models until it lists model
// (the router offers no event to await).
func waitRouterModel(t *testing.T, base, model string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		resp, err := http.Get(base + "/v1/models")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
		}
		if slices.ContainsFunc(list.Data, func(m struct {
			ID string `json:"id"`
		}) bool {
			return m.ID == model
		}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router does not list model %q (last: %v)", model, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
