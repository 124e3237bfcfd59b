package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// tokenizerFamily is the fixture model each engine row runs with: one
// family per engine, so that all three are exercised end to end.
var tokenizerFamily = map[string]string{
	harness.VLLM.Name:   "llama3",
	harness.SGLang.Name: "qwen3",
	harness.TRTLLM.Name: "gemma3",
}

// tokenizerReference is the tokenizer package's reference outputs for a
// family (host/internal/tokenizer/testdata, from transformers.js and
// jinja2).
type tokenizerReference struct {
	Texts []struct {
		Name             string   `json:"name"`
		Text             string   `json:"text"`
		AddSpecialTokens bool     `json:"add_special_tokens"`
		IDs              []uint32 `json:"ids"`
		Decoded          string   `json:"decoded"`
	} `json:"texts"`
	Chats []struct {
		Name                string            `json:"name"`
		Messages            []json.RawMessage `json:"messages"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		IDs                 []uint32          `json:"ids"`
		Error               *string           `json:"error"`
	} `json:"chats"`
}

// fixtureTokenizer returns the family's model directory (make
// tokenizer-models) and reference outputs; it skips without the model,
// and fails without it when VIGIL_REQUIRE_TOKENIZER_MODELS is set (CI).
func fixtureTokenizer(t *testing.T, family string) (string, tokenizerReference) {
	t.Helper()
	base, err := filepath.Abs(filepath.Join("..", "host", "internal", "tokenizer", "testdata"))
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
	var ref tokenizerReference
	b, err := os.ReadFile(filepath.Join(base, family+".json"))
	if err == nil {
		err = json.Unmarshal(b, &ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, ref
}

// text is the reference text name's token ids (no special tokens added)
// and its decoding.
func (r tokenizerReference) text(t *testing.T, name string) ([]uint32, string) {
	t.Helper()
	for _, x := range r.Texts {
		if x.Name == name && !x.AddSpecialTokens {
			return x.IDs, x.Decoded
		}
	}
	t.Fatalf("no reference text %q", name)
	return nil, ""
}

// TestTokenizedChat: with --tokenizer-dir, an ordinary client's chat
// reaches every engine, token-only ones too, as the reference token ids of
// the reference rendering of the model's chat template; the output is
// vigil's own detokenization, whose characters split across tokens stream
// whole; and a stop string spanning two tokens ends the request with
// finish_reason "stop", unemitted, the engine request aborted.
func TestTokenizedChat(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, testTokenizedChat)
}

func testTokenizedChat(t *testing.T, e *engine) {
	skipWithoutRequests(t, e)
	family, ok := tokenizerFamily[e.Name]
	if !ok {
		t.Skipf("no fixture model for %s", e.row())
	}
	dir, ref := fixtureTokenizer(t, family)
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 60*time.Second)
	r := startRouter(t, c, svc, 1)
	base := "http://" + r.HTTP

	var chatIdx = -1
	for i, ch := range ref.Chats {
		if ch.Name == "system user assistant user" && ch.AddGenerationPrompt && ch.Error == nil {
			chatIdx = i
		}
	}
	if chatIdx < 0 {
		t.Fatal("no reference chat \"system user assistant user\" with the generation prompt")
	}
	chat := ref.Chats[chatIdx]
	messages, err := json.Marshal(chat.Messages)
	if err != nil {
		t.Fatal(err)
	}
	// The output: text whose emoji are split across tokens.
	outIDs, outText := ref.text(t, "emoji")
	m.post(t, "/script", map[string]any{"tokens": outIDs})
	body := func(more string) string {
		return fmt.Sprintf(`{"model":%q,"messages":%s%s}`, e.servedModel, messages, more)
	}
	checkPrompt := func(t *testing.T) {
		t.Helper()
		if got := m.state(t).LastPrompt; !slices.Equal(got, chat.IDs) {
			t.Errorf("the engine got prompt ids\n%v\nwant the reference tokenization of the reference rendering\n%v", got, chat.IDs)
		}
	}

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed")
		}
		out, err := exec.Command("curl", "-sS", "--max-time", "30", base+"/v1/chat/completions",
			"-H", "Content-Type: application/json", "-d", body("")).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		var got struct {
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &got); err != nil || len(got.Choices) != 1 {
			t.Fatalf("response %s: %v", out, err)
		}
		ch := got.Choices[0]
		if ch.Message.Role != "assistant" || ch.Message.Content != outText || ch.FinishReason != "length" {
			t.Errorf("choice %+v, want the assistant's %q ending with length", ch, outText)
		}
		if got.Usage.PromptTokens != len(chat.IDs) || got.Usage.CompletionTokens != len(outIDs) {
			t.Errorf("usage %+v, want %d prompt and %d completion tokens", got.Usage, len(chat.IDs), len(outIDs))
		}
		checkPrompt(t)
	})

	t.Run("curl stream", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed")
		}
		out, err := exec.Command("curl", "-sSN", "--max-time", "30", base+"/v1/chat/completions",
			"-H", "Content-Type: application/json", "-d", body(`,"stream":true`)).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		deltas, finish := chatEvents(t, out)
		checkDeltas(t, deltas, outText)
		if finish != "length" {
			t.Errorf("finish_reason %q, want length", finish)
		}
		checkPrompt(t)
	})

	t.Run("openai package", func(t *testing.T) {
		got := openAIChat(t, base, e.servedModel, string(messages), "")
		checkDeltas(t, got.Deltas, outText)
		if got.Finish != "length" || got.Usage == nil || got.Usage.PromptTokens != len(chat.IDs) || got.Usage.CompletionTokens != len(outIDs) {
			t.Errorf("finish %q usage %+v, want length, %d prompt and %d completion tokens", got.Finish, got.Usage, len(chat.IDs), len(outIDs))
		}
		w := got.Whole
		if w.Content != outText || w.Finish != "length" || w.Usage == nil || w.Usage.PromptTokens != len(chat.IDs) || w.Usage.CompletionTokens != len(outIDs) {
			t.Errorf("not streamed: content %q finish %q usage %+v, want %q, length, %d prompt and %d completion tokens",
				w.Content, w.Finish, w.Usage, outText, len(chat.IDs), len(outIDs))
		}
		checkPrompt(t)
	})

	t.Run("text prompt", func(t *testing.T) {
		// A completion's text prompt, on a token-only engine too (the
		// registration says the worker takes text): the reference ids
		// with the model's special tokens added once.
		var text string
		var want []uint32
		for _, x := range ref.Texts {
			if x.Name == "multilingual" && x.AddSpecialTokens {
				text, want = x.Text, x.IDs
			}
		}
		code, _, resp := post(t, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d}`, e.servedModel, text, len(outIDs)))
		var got struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(resp), &got); err != nil || code != 200 || len(got.Choices) != 1 {
			t.Fatalf("got %d %s", code, resp)
		}
		if got.Choices[0].Text != outText || got.Choices[0].FinishReason != "length" {
			t.Errorf("choice %+v, want %q ending with length", got.Choices[0], outText)
		}
		if ids := m.state(t).LastPrompt; !slices.Equal(ids, want) {
			t.Errorf("the engine got prompt ids\n%v\nwant the reference tokenization\n%v", ids, want)
		}
	})

	t.Run("stop string across tokens", func(t *testing.T) {
		// "Hello world! ...": "lo wor" spans "Hello" and " world".
		plain, _ := ref.text(t, "plain")
		m.post(t, "/script", map[string]any{"tokens": plain})
		t.Cleanup(func() { m.post(t, "/script", map[string]any{"tokens": outIDs}) })
		before := m.state(t).AbortsTotal
		got := openAIChat(t, base, e.servedModel, string(messages), `["lo wor"]`)
		if text := strings.Join(got.Deltas, ""); text != "Hel" || got.Finish != "stop" {
			t.Errorf("client got %q, finish %q; want %q and stop: the stop string and what follows not emitted", text, got.Finish, "Hel")
		}
		if got.Usage == nil || got.Usage.CompletionTokens != 2 {
			t.Errorf("usage %+v, want 2 completion tokens (Hello, world)", got.Usage)
		}
		// The abort reaches the engine after the client's answer.
		deadline := time.Now().Add(10 * time.Second)
		for m.state(t).AbortsTotal == before {
			if time.Now().After(deadline) {
				t.Fatal("the engine recorded no abort of the stopped request")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// chatUsage is a chat completion's usage as the openai package reads it.
type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// chatResult is what chat.mjs prints: the streamed chat's deltas, finish
// reason and usage chunk, and the same chat not streamed.
type chatResult struct {
	Deltas []string
	Finish string
	Usage  *chatUsage
	Whole  struct {
		Content string
		Finish  string
		Usage   *chatUsage
	}
}

// openAIChat streams one chat with the openai npm package (include_usage
// on), stop a JSON array or "".
func openAIChat(t *testing.T, base, model, messages, stop string) chatResult {
	t.Helper()
	node, dir := appsNode(t)
	args := []string{filepath.Join(dir, "chat.mjs"), base + "/v1", model, messages}
	if stop != "" {
		args = append(args, stop)
	}
	out, err := exec.Command(node, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s%s", err, out, stderr)
	}
	var got chatResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	return got
}

// chatEvents reads a chat completion's SSE body: each event's
// delta.content, and the finish_reason.
func chatEvents(t *testing.T, body []byte) (deltas []string, finish string) {
	t.Helper()
	datas, done := sseData(string(body))
	for _, data := range datas {
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" {
				deltas = append(deltas, c.Delta.Content)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if !done {
		t.Errorf("no [DONE] in:\n%s", body)
	}
	return deltas, finish
}

// checkDeltas: the streamed pieces are whole characters (no U+FFFD, which
// a half character becomes in JSON) and make up want.
func checkDeltas(t *testing.T, deltas []string, want string) {
	t.Helper()
	for i, d := range deltas {
		if strings.ContainsRune(d, '\uFFFD') {
			t.Errorf("delta %d %q holds part of a character", i, d)
		}
	}
	if got := strings.Join(deltas, ""); got != want {
		t.Errorf("streamed %q, want %q", got, want)
	}
	if len(deltas) < 2 {
		t.Errorf("%d deltas, want the text streamed in pieces", len(deltas))
	}
}
