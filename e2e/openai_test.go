package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// openAIWorker starts e's mock (with extra flags), its vigil and a router
// over it, and returns the router's HTTP base URL and the mock.
func openAIWorker(t *testing.T, e *engine, extra ...string) (string, *mock) {
	t.Helper()
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond), Extra: extra})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc})
	v.waitLine("worker registered", 30*time.Second)
	r := startRouter(t, c, svc, 1)
	return "http://" + r.HTTP, m
}

// post sends a JSON body and returns the status, headers and body.
func post(t *testing.T, url, body string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// openAIError is the error object of an OpenAI error body.
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func decodeError(t *testing.T, body string) openAIError {
	t.Helper()
	var b struct {
		Error *openAIError `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error == nil {
		t.Fatalf("body %s: want an OpenAI error (%v)", body, err)
	}
	return *b.Error
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// idsJSON is a prompt of n token ids, as JSON.
func idsJSON(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i%50)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// TestRouterOpenAIContract: through vigil route to each engine, OpenAI's
// contract as clients depend on it: usage in its own last event only when
// asked, a request longer than the model refused in OpenAI's words with its
// numbers (by the worker, which knows a token prompt's length) or in the
// engine's own (where only the engine can tell), never with internal field
// paths or transport text, and chat refused naming messages by workers
// without a chat template.
func TestRouterOpenAIContract(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, testRouterOpenAIContract)
}

func testRouterOpenAIContract(t *testing.T, e *engine) {
	skipWithoutRequests(t, e)
	var extra []string
	if e.Name == harness.TRTLLM.Name {
		// max_input_len below max_seq_len: a prompt that fits the model
		// but not the engine's input, which only the engine refuses.
		extra = []string{"--max-input-len", "2048"}
	}
	base, m := openAIWorker(t, e, extra...)
	prompt := `[9906,1917]`
	if e.textPrompts {
		prompt = `"Hello"`
	}
	completion := func(more string) string {
		return fmt.Sprintf(`{"model":%q,"prompt":%s%s}`, e.servedModel, prompt, more)
	}

	t.Run("model object", func(t *testing.T) {
		// vLLM's max_model_len, from the worker's discovery metadata; the
		// id as OpenAI's clients put it in the path.
		resp, err := http.Get(base + "/v1/models/" + e.servedModel)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Created     int64  `json:"created"`
			MaxModelLen uint32 `json:"max_model_len"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/models/%s: %d, %v", e.servedModel, resp.StatusCode, err)
		}
		if got.ID != e.servedModel || got.Object != "model" || got.Created == 0 || got.MaxModelLen != e.maxModelLen {
			t.Errorf("model object %+v, want id %s, object model, created set, max_model_len %d", got, e.servedModel, e.maxModelLen)
		}
	})

	t.Run("stream usage", func(t *testing.T) {
		for _, withUsage := range []bool{false, true} {
			more := `,"max_tokens":3,"stream":true`
			if withUsage {
				more += `,"stream_options":{"include_usage":true}`
			}
			code, _, body := post(t, base+"/v1/completions", completion(more))
			if code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			var events []map[string]any
			datas, done := sseData(body)
			for _, data := range datas {
				var ev map[string]any
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				events = append(events, ev)
			}
			if !done || len(events) < 2 {
				t.Fatalf("include_usage %v: %d events, [DONE] %v:\n%s", withUsage, len(events), done, body)
			}
			last := events[len(events)-1]
			for i, ev := range events {
				usage, has := ev["usage"]
				switch {
				case !withUsage && has:
					t.Errorf("without include_usage, event %d has usage %v; want no usage key", i, usage)
				case withUsage && i < len(events)-1 && (!has || usage != nil):
					t.Errorf("with include_usage, event %d: usage %v (present %v), want null", i, usage, has)
				}
			}
			if withUsage {
				u, _ := last["usage"].(map[string]any)
				choices, _ := last["choices"].([]any)
				if u["completion_tokens"] != 3.0 || u["prompt_tokens"] == nil || choices == nil || len(choices) != 0 {
					t.Errorf("last event %v: want the usage (3 completion tokens) and choices []", last)
				}
			}
		}
	})

	t.Run("context length in OpenAI's words", func(t *testing.T) {
		n := int(e.maxModelLen) - 100
		code, _, body := post(t, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":1000}`, e.servedModel, idsJSON(n)))
		got := decodeError(t, body)
		want := fmt.Sprintf("This model's maximum context length is %d tokens; the request asks for %d tokens (%d in the prompt, 1000 for the completion).",
			e.maxModelLen, n+1000, n)
		if code != 400 || got.Message != want || str(got.Param) != "max_tokens" || str(got.Code) != "context_length_exceeded" || got.Type != "invalid_request_error" {
			t.Errorf("got %d %+v (param %s, code %s), want 400 %q, param max_tokens, code context_length_exceeded", code, got, str(got.Param), str(got.Code), want)
		}
	})

	t.Run("the engine's own refusal", func(t *testing.T) {
		var body, want string
		switch e.Name {
		case harness.VLLM.Name:
			// A text prompt's length only vLLM knows: a token per byte in the mock.
			body = fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":1}`, e.servedModel, strings.Repeat("x", int(e.maxModelLen)+1))
			want = fmt.Sprintf("The decoder prompt (length %d) is longer than the maximum model length of %d.", e.maxModelLen+1, e.maxModelLen)
		case harness.SGLang.Name:
			// The worker lets prompt + max_tokens reach the context; SGLang does not.
			body = fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":96}`, e.servedModel, idsJSON(int(e.maxModelLen)-96))
			want = fmt.Sprintf("You requested a total of %d tokens: %d tokens from the input messages and 96 tokens for the completion.", e.maxModelLen, e.maxModelLen-96)
		case harness.TRTLLM.Name:
			body = fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":10}`, e.servedModel, idsJSON(3000))
			want = "Prompt length (3000) exceeds maximum input length (2048)."
		default:
			t.Skipf("no engine-specific refusal for %s", e.row())
		}
		before := m.state(t).RequestsTotal
		code, _, resp := post(t, base+"/v1/completions", body)
		got := decodeError(t, resp)
		if code != 400 || !strings.Contains(got.Message, want) || strings.Contains(got.Message, "rpc error") || strings.HasPrefix(got.Message, "invalid argument") {
			t.Errorf("got %d %+v, want 400 with the engine's words %q and no transport text", code, got, want)
		}
		if m.state(t).RequestsTotal == before {
			t.Error("the mock engine saw no request: the refusal was not the engine's")
		}
	})

	t.Run("chat without a chat template", func(t *testing.T) {
		code, _, body := post(t, base+"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hello"}]}`, e.servedModel))
		got := decodeError(t, body)
		if code != 400 || str(got.Param) != "messages" || !strings.Contains(got.Message, "--chat-template") {
			t.Errorf("got %d %+v, want 400 naming messages and how to load a chat template", code, got)
		}
	})
}

// sseData returns the data of each server-sent event in body, in order,
// and whether the stream ended with OpenAI's "data: [DONE]".
func sseData(body string) (data []string, done bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case d == "[DONE]":
			done = true
		default:
			data = append(data, d)
		}
	}
	return data, done
}

// TestRouterMinTokens: through vigil to each engine, a stop token before
// min_tokens does not end the generation (the engine's own min tokens, as
// the mock keeps them), and min_p reaches the engines that have it.
func TestRouterMinTokens(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		base, m := openAIWorker(t, e)
		prompt := []uint32{9906, 1917}
		stop := e.outputToken(0, prompt, 0) // the first token out
		usage := func(extra string) (tokens int, finish string) {
			t.Helper()
			code, _, body := post(t, base+"/v1/completions", fmt.Sprintf(
				`{"model":%q,"prompt":[9906,1917],"max_tokens":6,"stop_token_ids":[%d]%s}`, e.servedModel, stop, extra))
			if code != 200 {
				t.Fatalf("%s: %d %s, want 200", extra, code, body)
			}
			var r struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) != 1 {
				t.Fatalf("body %s: want one choice (%v)", body, err)
			}
			return r.Usage.CompletionTokens, r.Choices[0].FinishReason
		}
		if n, finish := usage(""); n != 1 || finish != "stop" {
			t.Fatalf("without min_tokens: %d tokens, finish %q; want the stop token to end it at 1", n, finish)
		}
		if n, _ := usage(`,"min_tokens":4`); n < 4 {
			t.Errorf("min_tokens 4: %d tokens; want at least 4, the stop token before them ignored", n)
		}
		if !e.minP {
			return
		}
		if n, _ := usage(`,"min_p":0.25`); n < 1 {
			t.Fatalf("min_p 0.25: no tokens")
		}
		if st, err := m.State(); err != nil || st.LastMinP != 0.25 {
			t.Errorf("engine's min_p = %v (%v), want 0.25", st.LastMinP, err)
		}
	})
}

// TestStopWithoutTokenizer: without --tokenizer-dir, stop strings reach the
// engines that match them (vLLM's and TensorRT-LLM's servers detokenize),
// and SGLang's gRPC server, which has no tokenizer and refuses them, is
// never sent one: the router answers 400 naming stop (no worker of the
// model takes it) rather than have it dropped.
func TestStopWithoutTokenizer(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		if e.Variant != "" {
			t.Skip("one row per engine")
		}
		base, m := openAIWorker(t, e)
		code, _, body := post(t, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":[9906,1917],"max_tokens":3,"stop":["zz"]}`, e.servedModel))
		if e.Name != harness.SGLang.Name {
			if code != 200 {
				t.Errorf("stop without a tokenizer: %d %s, want 200 (the engine matches it)", code, body)
			}
			return
		}
		got := decodeError(t, body)
		if code != 400 || str(got.Param) != "stop" || !strings.Contains(got.Message, "--tokenizer-dir") {
			t.Errorf("SGLang, stop without a tokenizer: %d %+v, want 400 naming stop and --tokenizer-dir", code, got)
		}
		if n := m.state(t).RequestsTotal; n != 0 {
			t.Errorf("SGLang got %d requests, want none: the router refuses it", n)
		}
	})
}
