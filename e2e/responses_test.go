package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/tokenizer"
)

// TestResponses: issue 26's Responses API through vigil route to a vLLM
// worker with Llama 3's tokenizer, with the real npm clients: the openai
// package's client.responses.create, whole and streamed; the AI SDK's
// streamText with the default provider, openai(model), which posts to
// /v1/responses (404 before); a two-turn generateText conversation with it,
// turn two replaying turn one's messages as an item_reference that
// vigil resolves from the id alone; and after a streamed turn one, the
// clear 400 and the store: false fix; structured output by text.format
// (responses.parse, generateObject); logprobs by include and
// top_logprobs, whole and streamed (400 before).
func TestResponses(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := engineNamed(t, harness.VLLM.Name)
	dir, ref := fixtureTokenizer(t, tokenizerFamily[e.Name])
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
	const ada = "Ada Lovelace wrote the first program."
	scriptText(t, m, tok, ada)

	t.Run("openai", func(t *testing.T) {
		var got struct {
			Text, Status, ID, Streamed, FinalText, FinalStatus string
			Events                                             []string
			Usage                                              struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
				TotalTokens  int `json:"total_tokens"`
			}
		}
		runApp(t, base, model, "openai-responses", &got)
		if got.Text != ada || got.Status != "completed" || !strings.HasPrefix(got.ID, "resp_") || got.Usage.OutputTokens == 0 ||
			got.Usage.TotalTokens != got.Usage.InputTokens+got.Usage.OutputTokens {
			t.Errorf("whole: got %+v, want output_text %q, completed, usage", got, ada)
		}
		if got.Streamed != ada || got.FinalText != ada || got.FinalStatus != "completed" ||
			len(got.Events) < 9 || got.Events[0] != "response.created" || got.Events[len(got.Events)-1] != "response.completed" {
			t.Errorf("streamed: got %+v, want the text in deltas, created ... completed", got)
		}
		checkPromptHas(t, m, tok, "<|start_header_id|>user<|end_header_id|>\n\nWho is Ada?")
	})
	t.Run("ai-stream-text", func(t *testing.T) {
		var got struct {
			Text, Finish string
			Usage        struct{ OutputTokens int }
		}
		runApp(t, base, model, "ai-stream-text", &got)
		if got.Text != ada || got.Finish != "stop" || got.Usage.OutputTokens == 0 {
			t.Errorf("streamText got %+v, want %q, finish stop, usage", got, ada)
		}
	})
	t.Run("ai-two-turn", func(t *testing.T) {
		var got struct{ One, Two string }
		runApp(t, base, model, "ai-two-turn", &got)
		if got.One != ada || got.Two != ada {
			t.Errorf("two turns got %+v, want %q twice", got, ada)
		}
		checkPromptHas(t, m, tok, "<|start_header_id|>assistant<|end_header_id|>\n\n"+ada+"<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd Grace?")
	})
	t.Run("ai-stream-two-turn", func(t *testing.T) {
		var got struct {
			One, Two string
			Refused  *string
		}
		runApp(t, base, model, "ai-stream-two-turn", &got)
		if got.One != ada || got.Two != ada || got.Refused == nil || !strings.Contains(*got.Refused, "providerOptions.openai.store = false") {
			t.Errorf("streamed turn one, then two: got %+v, want the store: false advice, then %q", got, ada)
		}
		checkPromptHas(t, m, tok, "<|start_header_id|>assistant<|end_header_id|>\n\n"+ada+"<|eot_id|>")
	})
	t.Run("structured", func(t *testing.T) {
		type person struct {
			Name string  `json:"name"`
			Age  float64 `json:"age"`
		}
		scriptText(t, m, tok, `{"name": "Ada", "age": 36}`)
		var got struct{ Parsed, Object person }
		runApp(t, base, model, "responses-structured", &got)
		if want := (person{"Ada", 36}); got.Parsed != want || got.Object != want {
			t.Errorf("responses.parse and generateObject got %+v, want %+v", got, want)
		}
		checkEngineSchema(t, m)
	})
	t.Run("logprobs", func(t *testing.T) {
		out, text := ref.text(t, "plain")
		m.post(t, "/script", map[string]any{"tokens": out, "eos": true})
		var got struct{ Whole, Streamed, Done chatLogprobs }
		runApp(t, base, model, "openai-responses-logprobs", &got)
		pieces := referencePieces(t, dir)
		for name, g := range map[string]chatLogprobs{"whole": got.Whole, "deltas": got.Streamed, "output_text.done": got.Done} {
			if g.Content != text {
				t.Errorf("%s: text %q, want %q", name, g.Content, text)
			}
			expected{}.checkChat(t, name, g.Logprobs, out, pieces, []byte(text))
		}
	})
}

// checkPromptHas checks that the engine's last prompt, decoded, holds want.
func checkPromptHas(t *testing.T, m *mock, tok *tokenizer.Tokenizer, want string) {
	t.Helper()
	prompt, err := tok.Decode(m.state(t).LastPrompt, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, want) {
		t.Errorf("the engine got the prompt\n%s\nwant it to hold\n%s", prompt, want)
	}
}
