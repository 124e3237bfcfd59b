package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// TestRouterTokenize: through vigil route to a vLLM worker started with
// --tokenizer-dir (Llama 3's fixture tokenizer), POST /tokenize answers
// in vLLM's shape with the reference tokenizer's ids, for a text and for
// a chat rendered by the chat template; POST /detokenize gives the text
// back; a worker without a tokenizer gets 400 naming the model. On the
// file registry, the embedded default: the capability tokenize travels
// in its records.
func TestRouterTokenize(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := engineNamed(t, harness.VLLM.Name)
	dir, ref := fixtureTokenizer(t, "llama3")
	reg := fileRegistry{t.TempDir(), "llm"}
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC, extra: []string{"--tokenizer-dir", dir}}))
	v.waitLine("worker registered", 60*time.Second)
	base := "http://" + reg.router(t, 1).HTTP

	type tokenized struct {
		Count       int       `json:"count"`
		MaxModelLen int       `json:"max_model_len"`
		Tokens      []uint32  `json:"tokens"`
		TokenStrs   *[]string `json:"token_strs"`
	}
	tokenize := func(t *testing.T, body string) tokenized {
		t.Helper()
		code, _, resp := post(t, base+"/tokenize", body)
		var got tokenized
		if code != 200 || json.Unmarshal([]byte(resp), &got) != nil {
			t.Fatalf("POST /tokenize %s: %d %s, want 200 and vLLM's TokenizeResponse", body, code, resp)
		}
		return got
	}
	ids, text := ref.text(t, "multilingual")
	got := tokenize(t, fmt.Sprintf(`{"model":%q,"prompt":%q,"add_special_tokens":false,"return_token_strs":true}`, e.servedModel, text))
	if !slices.Equal(got.Tokens, ids) || got.Count != len(ids) || got.TokenStrs == nil || len(*got.TokenStrs) != len(ids) {
		t.Errorf("tokenize: %+v\nwant the reference ids %v, their count and a string each", got, ids)
	}
	code, _, resp := post(t, base+"/detokenize", fmt.Sprintf(`{"model":%q,"tokens":%s}`, e.servedModel, mustJSON(t, got.Tokens)))
	var detok struct {
		Prompt string `json:"prompt"`
	}
	if code != 200 || json.Unmarshal([]byte(resp), &detok) != nil || detok.Prompt != text {
		t.Errorf("detokenize: %d %s, want 200 and the text back, %q", code, resp, text)
	}

	chats := 0
	for _, ch := range ref.Chats {
		if ch.Name != "system user assistant user" || !ch.AddGenerationPrompt || ch.Error != nil {
			continue
		}
		chats++
		msgs := mustJSON(t, ch.Messages)
		if got := tokenize(t, fmt.Sprintf(`{"model":%q,"messages":%s}`, e.servedModel, msgs)); !slices.Equal(got.Tokens, ch.IDs) || got.TokenStrs != nil {
			t.Errorf("tokenize messages: %+v\nwant the reference ids of the template's rendering %v, token_strs null", got, ch.IDs)
		}
	}

	if chats == 0 {
		t.Error("no reference chat \"system user assistant user\" with the generation prompt")
	}

	// A worker without --tokenizer-dir serves no tokenize.
	plainReg := fileRegistry{t.TempDir(), "llm"}
	pm := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	pv := startVigil(t, plainReg.opts(vigilOpts{engine: e, engineAddr: pm.GRPC}))
	pv.waitLine("worker registered", 60*time.Second)
	plain := "http://" + plainReg.router(t, 1).HTTP
	code, _, resp = post(t, plain+"/tokenize", fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, e.servedModel))
	if got := decodeError(t, resp); code != 400 || str(got.Param) != "model" || got.Type != "invalid_request_error" {
		t.Errorf("without a tokenizer: %d %+v, want 400 naming model", code, got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
