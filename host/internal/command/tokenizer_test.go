package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/endpoint"
	"github.com/vigilhq/vigil/sdk"
)

// fixtureModel is a fixture model directory of the tokenizer package, or a
// skip without it (make tokenizer-models).
func fixtureModel(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "tokenizer", "testdata", "models", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("VIGIL_REQUIRE_TOKENIZER_MODELS") != "" {
			t.Fatalf("%s missing: run make tokenizer-models", dir)
		}
		t.Skipf("%s missing: run make tokenizer-models", dir)
	}
	return dir
}

// --tokenizer-dir loads the model's tokenizer and chat template; a
// --chat-template that does not compile is named at start-up, with a
// tokenizer or without; --dry-run shows what was loaded.
func TestTokenizerFlags(t *testing.T) {
	dir := fixtureModel(t, "qwen3")
	exe, _ := thirdPartyAdapter(t)
	code, stdout, stderr := dryRun(t, "run", "--dry-run", "--registry-dir", t.TempDir(), "--engine-plugin", exe, "--tokenizer-dir", dir)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got["tokenizer-dir"] != dir || got["chat-template-loaded"] != true || !strings.Contains(got["tokenizer"].(string), dir) {
		t.Errorf("dry run: tokenizer-dir %v, tokenizer %v, chat-template-loaded %v; want %s loaded with its template",
			got["tokenizer-dir"], got["tokenizer"], got["chat-template-loaded"], dir)
	}

	bad := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(bad, []byte("{% if %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	// With or without --tokenizer-dir: the tokenizer may come from the
	// engine's model path, which is known only later.
	for _, tokFlags := range [][]string{{"--tokenizer-dir", dir}, nil} {
		args := append([]string{"run", "--dry-run", "--registry-dir", t.TempDir(), "--engine-plugin", exe, "--chat-template", bad}, tokFlags...)
		code, _, stderr = dryRun(t, args...)
		if code != ExitConfig || !strings.Contains(stderr, `--chat-template "`+bad+`"`) || !strings.Contains(stderr, "Expected an expression") {
			t.Errorf("bad template %v: exit %d, stderr %q; want %d naming --chat-template and what is wrong", tokFlags, code, stderr, ExitConfig)
		}
	}
}

// Without --tokenizer-dir, the tokenizer comes from the model path the
// engine reports when it is a local directory holding tokenizer.json;
// anything else leaves the worker without one, and a broken one is only a
// warning.
func TestTokenizerFromModelPath(t *testing.T) {
	dir := fixtureModel(t, "llama3")
	broken := badTokenizerDir(t)
	for name, tc := range map[string]struct {
		modelID      string
		loaded, chat bool
	}{
		"model directory": {dir, true, true},
		"hub id":          {"meta-llama/Llama-3.1-8B-Instruct", false, false},
		"broken":          {broken, false, false},
	} {
		var set func(sdk.Generator) sdk.Generator
		hook := workerTokenizer(runConfig{}, nil, func(w func(sdk.Generator) sdk.Generator) { set = w }, hclog.NewNullLogger())
		loaded, chat := hook(sdk.Worker{ModelID: tc.modelID})
		if loaded != tc.loaded || chat != tc.chat || (set != nil) != tc.loaded {
			t.Errorf("%s: loaded %v chat %v (endpoint given a wrapper: %v), want %v %v", name, loaded, chat, set != nil, tc.loaded, tc.chat)
		}
		if set == nil {
			continue
		}
		// What the endpoint asks the wrapped engine: text and chat.
		if p, ok := set(nil).(endpoint.Prompts); !ok || !p.TakesText() || p.TakesChat() != tc.chat {
			t.Errorf("%s: the wrapped engine is %T, want an endpoint.Prompts taking text, and chat %v", name, set(nil), tc.chat)
		}
	}
}
