package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// paramRow is one row of the parameter table in docs/router.md, which
// TestParameterTable writes (VIGIL_UPDATE_DOCS=1) and checks: a request
// parameter, what vigil does with it, and per engine what reaches the
// engine.
type paramRow struct {
	param string
	// on is where the parameter exists: "chat", "completions" or "both";
	// origin is "OpenAI" or "vLLM" (vLLM's server's extensions).
	on, origin string
	// value is a JSON value that asks for something; "" sends the row's
	// base request unchanged (the parameter is in it).
	value string
	// vigil says what vigil does with it, for the docs.
	vigil string
	// vllm, sglang, trtllm are what each engine's last request carries:
	// "path" (protojson, dots for nesting) or "path=JSON" for the engine
	// field set; "worker" when vigil's worker does it and no engine field
	// is set (200); "400" when the request is refused naming the
	// parameter.
	vllm, sglang, trtllm string
	// sglangNew is SGLang's on its newer layout (sglang-mock --layout
	// new); "" when it is sglang's.
	sglangNew string
}

// cell is r's cell for the column named col.
func (r paramRow) cell(col string) string {
	switch col {
	case harness.VLLM.Name:
		return r.vllm
	case harness.TRTLLM.Name:
		return r.trtllm
	case sglangNewColumn:
		if r.sglangNew != "" {
			return r.sglangNew
		}
	}
	return r.sglang
}

// sglangNewColumn is the column of SGLang's newer layout.
const sglangNewColumn = "sglang-new-layout"

const (
	onChat = "chat"
	onComp = "completions"
	onBoth = "both"
)

// paramTable is the parameter table: every key of the pinned openai
// package's ChatCompletionCreateParams and CompletionCreateParams, and
// vLLM's extensions vigil takes. The engine cells hold with
// --tokenizer-dir (the worker tokenizes, renders chats and matches stop
// strings).
var paramTable = []paramRow{
	{"model", onBoth, "OpenAI", "", "picks the workers (their served model name)", "worker", "worker", "worker", ""},
	{"messages", onChat, "OpenAI", "", "rendered by the worker's chat template; `name` reaches the template; `developer` is `system` unless the template knows it; output-only fields of replayed assistant turns are accepted", "tokenIds", "inputIds", "tokenized.inputTokenIds", ""},
	{"prompt", onComp, "OpenAI", "", "a string, token ids, or a list of either (a batch: one choice per prompt)", "tokenIds", "inputIds", "tokenized.inputTokenIds", ""},
	{"max_tokens", onBoth, "OpenAI", "", "", "stopping.maxNewTokens=4", "samplingParams.maxNewTokens=4", "maxTokens=4", ""},
	{"max_completion_tokens", onChat, "OpenAI", "6", "chat's name for max_tokens", "stopping.maxNewTokens=6", "samplingParams.maxNewTokens=6", "maxTokens=6", ""},
	{"temperature", onBoth, "OpenAI", "0.5", "", "temperature=0.5", "samplingParams.temperature=0.5", "samplingConfig.temperature=0.5", ""},
	{"top_p", onBoth, "OpenAI", "0.5", "", "sampling.topP=0.5", "samplingParams.topP=0.5", "samplingConfig.topP=0.5", ""},
	{"top_k", onBoth, "vLLM", "5", "-1 is all", "sampling.topK=5", "samplingParams.topK=5", "samplingConfig.topK=5", ""},
	{"min_p", onBoth, "vLLM", "0.25", "0 to 1", "sampling.minP=0.25", "samplingParams.minP=0.25", "samplingConfig.minP=0.25", ""},
	{"seed", onBoth, "OpenAI", "7", "with `n`, choice i gets seed + i", "sampling.seed=\"7\"", "400", "samplingConfig.seed=\"7\"", "samplingParams.seed=\"7\""},
	{"n", onBoth, "OpenAI", "2", "1 to 128: the worker sends n requests of one and merges the choices by index", "worker", "worker", "worker", ""},
	{"best_of", onComp, "OpenAI", "2", "1 only", "400", "400", "400", ""},
	{"stop", onBoth, "OpenAI", `["zz"]`, "matched by the worker on its decoded text; without --tokenizer-dir, passed to engines that match stop strings, 400 on SGLang (its gRPC server has no tokenizer)", "worker", "worker", "worker", ""},
	{"stop_token_ids", onBoth, "vLLM", "[5]", "", "stopping.stopTokenIds=[5]", "samplingParams.stopTokenIds=[5]", "stopTokenIds=[5]", ""},
	{"ignore_eos", onBoth, "vLLM", "true", "", "stopping.ignoreEos=true", "samplingParams.ignoreEos=true", "ignoreEos=true", ""},
	{"min_tokens", onBoth, "vLLM", "2", "at most max_tokens", "stopping.minNewTokens=2", "samplingParams.minNewTokens=2", "samplingConfig.minTokens=2", ""},
	{"presence_penalty", onBoth, "OpenAI", "0.5", "-2 to 2", "decoding.presencePenalty=0.5", "samplingParams.presencePenalty=0.5", "samplingConfig.presencePenalty=0.5", ""},
	{"frequency_penalty", onBoth, "OpenAI", "0.5", "-2 to 2", "decoding.frequencyPenalty=0.5", "samplingParams.frequencyPenalty=0.5", "samplingConfig.frequencyPenalty=0.5", ""},
	{"repetition_penalty", onBoth, "vLLM", "1.5", "> 0", "decoding.repetitionPenalty=1.5", "samplingParams.repetitionPenalty=1.5", "samplingConfig.repetitionPenalty=1.5", ""},
	{"logit_bias", onBoth, "OpenAI", `{"5":-100}`, "token id to -100..100", "decoding.logitBias", "400", "embeddingBias", ""},
	{"response_format", onBoth, "OpenAI", `{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object"}}}`, "`json_object`, `json_schema` (with `strict`)", "decoding.json", "samplingParams.jsonSchema", "guidedDecoding.guideType=\"GUIDE_TYPE_JSON_SCHEMA\"", "samplingParams.guidedDecoding.jsonSchema"},
	{"guided_json", onBoth, "vLLM", `{"type":"object"}`, "as response_format json_schema", "decoding.json", "samplingParams.jsonSchema", "guidedDecoding.guideType=\"GUIDE_TYPE_JSON_SCHEMA\"", "samplingParams.guidedDecoding.jsonSchema"},
	{"guided_regex", onBoth, "vLLM", `"[ab]+"`, "", "decoding.regex=\"[ab]+\"", "samplingParams.regex=\"[ab]+\"", "guidedDecoding.guide=\"[ab]+\"", "samplingParams.guidedDecoding.regex=\"[ab]+\""},
	{"guided_choice", onBoth, "vLLM", `["yes","no"]`, "an escaped regex where the engine has no choice", "decoding.choice", "samplingParams.regex", "guidedDecoding.guideType=\"GUIDE_TYPE_REGEX\"", "samplingParams.guidedDecoding.choice"},
	{"guided_grammar", onBoth, "vLLM", `"root ::= \"a\""`, "passed as it is", "decoding.grammar", "400", "guidedDecoding.guideType=\"GUIDE_TYPE_EBNF_GRAMMAR\"", "samplingParams.guidedDecoding.ebnf"},
	{"structured_outputs", onBoth, "vLLM", `{"regex":"[ab]+"}`, "vLLM's newer object: json, regex, choice, grammar, json_object, structural_tag", "decoding.regex=\"[ab]+\"", "samplingParams.regex=\"[ab]+\"", "guidedDecoding.guide=\"[ab]+\"", "samplingParams.guidedDecoding.regex=\"[ab]+\""},
	{"chat_template_kwargs", onChat, "vLLM", `{"enable_thinking":false}`, "variables of the chat template; keys the worker sets itself get 400", "worker", "worker", "worker", ""},
	{"echo", onComp, "OpenAI", "true", "the prompt before the output", "worker", "worker", "worker", ""},
	{"logprobs", onChat, "OpenAI", "true", "each token's logprob, its text and bytes from the worker's tokenizer; workers that list `logprobs`", "response.outputLogprobs=true", "returnLogprob=true", "outputConfig.logprobs=1", ""},
	{"top_logprobs", onChat, "OpenAI", `2,"logprobs":true`, "0 to 20, with `logprobs`; workers that list `logprobs` of as many", "response.outputCandidates.topN=2", "topLogprobsNum=2", "outputConfig.logprobs=2", ""},
	{"logprobs", onComp, "OpenAI", "2", "0 up to the workers' `logprobs`; with `echo`, the prompt's first (workers that list `prompt_logprobs`)", "response.outputCandidates.topN=2", "topLogprobsNum=2", "outputConfig.logprobs=2", ""},
	{"suffix", onComp, "OpenAI", `"x"`, `"" only`, "400", "400", "400", ""},
	{"stream", onBoth, "OpenAI", "true", "server-sent events", "worker", "worker", "worker", ""},
	{"stream_options", onBoth, "OpenAI", `{"include_usage":true},"stream":true`, "`include_usage`", "worker", "worker", "worker", ""},
	{"user", onBoth, "OpenAI", `"u1"`, "accepted, not used", "worker", "worker", "worker", ""},
	{"safety_identifier", onBoth, "OpenAI", `"u1"`, "accepted, not used", "worker", "worker", "worker", ""},
	{"prompt_cache_key", onBoth, "OpenAI", `"k1"`, "accepted; kept for cache-aware placement", "worker", "worker", "worker", ""},
	{"prompt_cache_options", onBoth, "OpenAI", `{"mode":"explicit"}`, "accepted, not used", "worker", "worker", "worker", ""},
	{"prompt_cache_retention", onBoth, "OpenAI", `"24h"`, "accepted: vigil stores nothing", "worker", "worker", "worker", ""},
	{"store", onBoth, "OpenAI", "true", "accepted: vigil stores nothing", "worker", "worker", "worker", ""},
	{"metadata", onBoth, "OpenAI", `{"a":"b"}`, "accepted: vigil stores nothing", "worker", "worker", "worker", ""},
	{"service_tier", onChat, "OpenAI", `"flex"`, "`auto` or `default` only", "400", "400", "400", ""},
	{"verbosity", onChat, "OpenAI", `"low"`, "`medium` only", "400", "400", "400", ""},
	{"reasoning_effort", onChat, "OpenAI", `"low"`, "null only", "400", "400", "400", ""},
	{"modalities", onChat, "OpenAI", `["text","audio"]`, "`[\"text\"]` only", "400", "400", "400", ""},
	{"audio", onChat, "OpenAI", `{"voice":"alloy","format":"wav"}`, "null only", "400", "400", "400", ""},
	{"prediction", onChat, "OpenAI", `{"type":"content","content":"x"}`, "null only", "400", "400", "400", ""},
	{"web_search_options", onChat, "OpenAI", `{}`, "null only", "400", "400", "400", ""},
	{"moderation", onChat, "OpenAI", `{"model":"omni-moderation-latest"}`, "null only", "400", "400", "400", ""},
	{"tools", onChat, "OpenAI", `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`, "function tools, given to the chat template, calls parsed from the output into `tool_calls`, by workers that list `tools` (a tool-call parser on: this table's Llama 3 template renders no tools, so 400 naming `tools`; TestToolApps and TestToolOutput serve them)", "400", "400", "400", ""},
	{"tool_choice", onChat, "OpenAI", `"required"`, "`none`, `auto`, `required` or a function of `tools`, with `tools` only: without them, anything but `none` is 400", "400", "400", "400", ""},
	{"parallel_tool_calls", onChat, "OpenAI", "false", "with `tools`: false returns the first call only", "worker", "worker", "worker", ""},
	{"functions", onChat, "OpenAI", `[{"name":"f"}]`, "`[]` only: send `tools`", "400", "400", "400", ""},
	{"function_call", onChat, "OpenAI", `"auto"`, "`none` only: send `tool_choice`", "400", "400", "400", ""},
	{"skip_special_tokens", onBoth, "vLLM", "false", "true only", "400", "400", "400", ""},
	{"include_stop_str_in_output", onBoth, "vLLM", "true", "false only", "400", "400", "400", ""},
	{"add_generation_prompt", onChat, "vLLM", "false", "true only", "400", "400", "400", ""},
	{"continue_final_message", onChat, "vLLM", "true", "false only", "400", "400", "400", ""},
}

// openAIKeys reads the keys of the interface iface in the pinned openai
// package's declaration file rel.
func openAIKeys(t *testing.T, rel, iface string) []string {
	t.Helper()
	_, dir := appsNode(t)
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "openai", rel))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), "export interface "+iface+" {\n")
	body, _, _ = strings.Cut(body, "\n}\n")
	if !ok {
		t.Fatalf("%s: no interface %s", rel, iface)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^    ([a-z_]+)\??:`).FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// parameterTableMarkdown is the table as docs/router.md holds it.
func parameterTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| parameter | endpoints | from | vigil | vLLM | SGLang | SGLang, newer layout | TensorRT-LLM |\n|---|---|---|---|---|---|---|---|\n")
	cell := func(s string) string {
		switch s {
		case "worker":
			return "vigil"
		case "400":
			return "400"
		}
		path, _, _ := strings.Cut(s, "=")
		return "`" + path + "`"
	}
	for _, r := range paramTable {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", r.param, r.on, r.origin, r.vigil,
			cell(r.vllm), cell(r.sglang), cell(r.cell(sglangNewColumn)), cell(r.trtllm))
	}
	return b.String()
}

const (
	tableBegin = "<!-- parameter table: written by e2e TestParameterTable (VIGIL_UPDATE_DOCS=1) -->\n"
	tableEnd   = "<!-- end of parameter table -->\n"
)

// TestParameterTable: the table in docs/router.md covers every parameter
// of the pinned openai package's ChatCompletionCreateParams and
// CompletionCreateParams, is the one paramTable writes, and holds: each
// row's parameter, sent to each engine through vigil route and a worker
// with the model's tokenizer, sets the engine field the row names (the
// mock's record of its last request), is done by vigil, or gets 400 naming
// it.
func TestParameterTable(t *testing.T) {
	skipShort(t)
	t.Parallel()
	checkTableCoverage(t)
	checkTableDoc(t)
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipWithoutRequests(t, e)
		if e.Variant != "" {
			t.Skip("the table is of each engine's main API")
		}
		testParamColumn(t, e, e.Name)
	})
	t.Run(sglangNewColumn, func(t *testing.T) {
		t.Parallel()
		testParamColumn(t, engineNamed(t, harness.SGLang.Name), sglangNewColumn, "--layout", "new")
	})
}

// testParamColumn checks the column col with e's mock, started with
// extra flags, behind a worker with a tokenizer (Llama 3's for every
// engine: the table is of parameters, and Gemma 3's file takes tens of
// seconds of CPU to load in a race build).
func testParamColumn(t *testing.T, e *engine, col string, extra ...string) {
	dir, _ := fixtureTokenizer(t, "llama3")
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond), Extra: extra})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 120*time.Second)
	base := "http://" + startRouter(t, c, svc, 1).HTTP
	for _, r := range paramTable {
		for _, ep := range []string{onChat, onComp} {
			if r.on == onBoth || r.on == ep {
				checkParamRow(t, base, m, e, r.cell(col), r, ep)
			}
		}
	}
}

func checkTableCoverage(t *testing.T) {
	t.Helper()
	for _, x := range []struct{ on, rel, iface string }{
		{onChat, "resources/chat/completions/completions.d.ts", "ChatCompletionCreateParamsBase"},
		{onComp, "resources/completions.d.ts", "CompletionCreateParamsBase"},
	} {
		for _, k := range openAIKeys(t, x.rel, x.iface) {
			if !slices.ContainsFunc(paramTable, func(r paramRow) bool { return r.param == k && (r.on == onBoth || r.on == x.on) }) {
				t.Errorf("openai's %s has %s, which the parameter table does not have for %s", x.iface, k, x.on)
			}
		}
	}
}

func checkTableDoc(t *testing.T) {
	t.Helper()
	doc := readFile(t, routerDoc)
	before, rest, ok1 := strings.Cut(doc, tableBegin)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no parameter table markers", routerDoc)
	}
	want := before + tableBegin + parameterTableMarkdown() + tableEnd + after
	if os.Getenv("VIGIL_UPDATE_DOCS") != "" {
		if err := os.WriteFile(routerDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's parameter table is not paramTable's: run VIGIL_UPDATE_DOCS=1 go test -run TestParameterTable ./e2e/", routerDoc)
	}
}

// routerDoc is the router's manual, which holds the parameter table.
const routerDoc = "../docs/router.md"

// checkParamRow sends r's parameter on ep and checks what its cell says.
func checkParamRow(t *testing.T, base string, m *mock, e *engine, cell string, r paramRow, ep string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":4`, e.servedModel)
	path := "/v1/completions"
	if ep == onChat {
		path = "/v1/chat/completions"
		body += `,"messages":[{"role":"user","content":"Hi"}]`
	} else {
		body += `,"prompt":"Hi"`
	}
	checkCell(t, base+path, body, ep+" ", r.param, r.value, cell, m)
}

// checkCell posts body (an open JSON object) with param set to value, if
// any, to url and checks that the answer is what a table's cell says: 400
// naming param, "worker" (taken), or the engine request's field (with
// "=value", its value). what begins the errors.
func checkCell(t *testing.T, url, body, what, param, value, cell string, m *mock) {
	t.Helper()
	if value != "" {
		body += fmt.Sprintf(",%q:%s", param, value)
	}
	code, _, resp := post(t, url, body+"}")
	switch {
	case cell == "400":
		if code != 400 || str(decodeError(t, resp).Param) != param {
			t.Errorf("%s%s=%s: %d %s; the table says 400 naming it", what, param, value, code, resp)
		}
		return
	case code != 200:
		t.Errorf("%s%s=%s: %d %s; the table says it is taken", what, param, value, code, resp)
		return
	case cell == "worker":
		return
	}
	field, want, hasValue := strings.Cut(cell, "=")
	last := m.state(t).LastRequest
	got, ok := jsonPath(last, field)
	switch {
	case !ok:
		t.Errorf("%s%s=%s: the engine's request has no %s: %s", what, param, value, field, last)
	case hasValue && !jsonEqualText(got, want):
		t.Errorf("%s%s=%s: the engine's %s = %s, want %s", what, param, value, field, got, want)
	}
}

// jsonPath finds the dotted path in the JSON object raw.
func jsonPath(raw json.RawMessage, path string) (json.RawMessage, bool) {
	cur := raw
	for _, k := range strings.Split(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		next, ok := obj[k]
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func jsonEqualText(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(bx) == string(by)
}
