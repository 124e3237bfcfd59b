package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// respParamRow is one row of the Responses API's parameter table in
// docs/router.md, which TestResponsesParameterTable writes
// (VIGIL_UPDATE_DOCS=1) and checks against vLLM's mock.
type respParamRow struct {
	param string
	// value is a JSON value that asks for something; "" sends the base
	// request unchanged (the parameter is in it).
	value string
	// vigil says what vigil does with it, for the docs.
	vigil string
	// vllm is as paramRow's cells: an engine field path (=JSON), "worker"
	// or "400" (naming param).
	vllm string
}

// responsesParamTable covers every key of the pinned openai package's
// ResponseCreateParamsBase.
var responsesParamTable = []respParamRow{
	{"model", "", "picks the workers (their served model name)", "worker"},
	{"input", "", "a string, or a list of message items (roles user, system, developer, assistant; content a string or `input_text`/`output_text` parts, `refusal` in an assistant's history), `function_call`, `function_call_output` and `reasoning` items, and `item_reference` items to vigil's own output items; rendered by the worker's chat template", "tokenIds"},
	{"instructions", `"Be brief."`, "a system message before the input", "tokenIds"},
	{"max_output_tokens", "6", "chat's max_completion_tokens", "stopping.maxNewTokens=6"},
	{"temperature", "0.5", "", "temperature=0.5"},
	{"top_p", "0.5", "", "sampling.topP=0.5"},
	{"text", `{"format":{"type":"json_schema","name":"p","schema":{"type":"object"}}}`, "`format`: `text`, `json_object`, `json_schema` (`name`, `schema`, `strict`, `description`) as chat's response_format; `verbosity`: `medium` only", "decoding.json"},
	{"stream", "true", "the Responses API's events", "worker"},
	{"stream_options", `{"include_obfuscation":false},"stream":true`, "`include_obfuscation` accepted (vigil pads no event)", "worker"},
	{"store", "true", "accepted: vigil stores nothing; an answer's message id carries its text", "worker"},
	{"metadata", `{"a":"b"}`, "accepted, echoed", "worker"},
	{"user", `"u1"`, "accepted, echoed", "worker"},
	{"safety_identifier", `"u1"`, "accepted, echoed", "worker"},
	{"prompt_cache_key", `"k1"`, "accepted; kept for cache-aware placement", "worker"},
	{"prompt_cache_options", `{"mode":"explicit"}`, "accepted, not used", "worker"},
	{"prompt_cache_retention", `"24h"`, "accepted: vigil stores nothing", "worker"},
	{"parallel_tool_calls", "true", "with tools, false returns the first call only; without, nothing", "worker"},
	{"max_tool_calls", "3", "accepted: it bounds calls to built-in tools, which vigil serves none of", "worker"},
	{"tools", `[{"type":"function","name":"f","parameters":{}}]`, "function tools (`name`, `description`, `parameters`, `strict`), given to the chat template as chat's tools; other tool types 400; workers that list `tools`", "400"},
	{"tool_choice", `"required"`, "`none`, `auto`, `required` (with tools) or `{\"type\": \"function\", \"name\"}` naming one of them", "400"},
	{"service_tier", `"flex"`, "`auto` or `default` only", "400"},
	{"truncation", `"auto"`, "`disabled` only", "400"},
	{"reasoning", `{"effort":"low"}`, "null only (or all its fields null)", "400"},
	{"include", `["message.output_text.logprobs"]`, "`message.output_text.logprobs` only: the output text's logprobs, as chat's; workers that list `logprobs`", "response.outputLogprobs=true"},
	{"top_logprobs", `2,"include":["message.output_text.logprobs"]`, "0 to 20, the alternatives a position with `include`'s logprobs (alone, none, as OpenAI); workers that list `logprobs` of as many", "response.outputCandidates.topN=2"},
	{"background", "true", "false only", "400"},
	{"background_options", `{}`, "null only", "400"},
	{"previous_response_id", `"resp_1"`, "null only: vigil keeps no state (send the whole conversation)", "400"},
	{"conversation", `"conv_1"`, "null only: vigil keeps no state (send the whole conversation)", "400"},
	{"prompt", `{"id":"pmpt_1"}`, "null only: vigil keeps no stored prompts", "400"},
	{"context_management", `[{"type":"compaction"}]`, "null only", "400"},
	{"image", `{}`, "null only", "400"},
	{"moderation", `{"model":"omni-moderation-latest"}`, "null only", "400"},
	{"access_programs", `{}`, "null only", "400"},
}

const (
	respTableBegin = "<!-- responses parameter table: written by e2e TestResponsesParameterTable (VIGIL_UPDATE_DOCS=1) -->\n"
	respTableEnd   = "<!-- end of responses parameter table -->\n"
)

// responsesTableMarkdown is the table as docs/router.md holds it.
func responsesTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| parameter | vigil | vLLM |\n|---|---|---|\n")
	for _, r := range responsesParamTable {
		cell := r.vllm
		switch cell {
		case "worker":
			cell = "vigil"
		case "400":
		default:
			path, _, _ := strings.Cut(cell, "=")
			cell = "`" + path + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.param, r.vigil, cell)
	}
	return b.String()
}

// TestResponsesParameterTable: docs/router.md's Responses table covers
// every key of the pinned openai package's ResponseCreateParamsBase, is
// the one responsesParamTable writes, and holds on vLLM's mock behind a
// worker with Llama 3's tokenizer: each row's parameter sets the engine
// field it names, is done by vigil, or gets 400 naming it.
func TestResponsesParameterTable(t *testing.T) {
	skipShort(t)
	t.Parallel()
	for _, k := range openAIKeys(t, "resources/responses/responses.d.ts", "ResponseCreateParamsBase") {
		if !slices.ContainsFunc(responsesParamTable, func(r respParamRow) bool { return r.param == k }) {
			t.Errorf("openai's ResponseCreateParamsBase has %s, which the Responses parameter table does not have", k)
		}
	}
	checkResponsesTableDoc(t)
	e := engineNamed(t, harness.VLLM.Name)
	dir, _ := fixtureTokenizer(t, "llama3")
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 120*time.Second)
	base := "http://" + startRouter(t, c, svc, 1).HTTP
	for _, r := range responsesParamTable {
		checkResponsesRow(t, base, m, e, r)
	}
}

func checkResponsesTableDoc(t *testing.T) {
	t.Helper()
	doc := readFile(t, routerDoc)
	before, rest, ok1 := strings.Cut(doc, respTableBegin)
	_, after, ok2 := strings.Cut(rest, respTableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no Responses parameter table markers", routerDoc)
	}
	want := before + respTableBegin + responsesTableMarkdown() + respTableEnd + after
	if os.Getenv("VIGIL_UPDATE_DOCS") != "" {
		if err := os.WriteFile(routerDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's Responses parameter table is not responsesParamTable's: run VIGIL_UPDATE_DOCS=1 go test -run TestResponsesParameterTable ./e2e/", routerDoc)
	}
}

// checkResponsesRow sends r's parameter to /v1/responses and checks what
// its cell says.
func checkResponsesRow(t *testing.T, base string, m *mock, e *engine, r respParamRow) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"input":"Hi","max_output_tokens":4`, e.servedModel)
	checkCell(t, base+"/v1/responses", body, "", r.param, r.value, r.vllm, m)
}
