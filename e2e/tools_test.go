package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/tokenizer"
)

// toolStack is issue 27's setup: a vLLM mock behind vigil run with Qwen3's
// tokenizer and chat template (which renders tools), the hermes tool-call
// parser and the qwen3 reasoning parser, metrics on, and vigil route on a
// file registry.
type toolStack struct {
	base, model, metrics string
	m                    *mock
	tok                  *tokenizer.Tokenizer
}

func startToolStack(t *testing.T) *toolStack {
	t.Helper()
	e := engineNamed(t, harness.VLLM.Name)
	dir, _ := fixtureTokenizer(t, "qwen3")
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := fileRegistry{t.TempDir(), "llm"}
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	metrics := addr(freePort(t))
	v := startVigil(t, reg.opts(vigilOpts{engine: e, engineAddr: m.GRPC, extra: []string{"--tokenizer-dir", dir,
		"--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
		"--metrics-listen", metrics}}))
	v.waitLine("worker registered", 60*time.Second)
	return &toolStack{base: "http://" + reg.router(t, 1).HTTP, model: e.servedModel, metrics: metrics, m: m, tok: tok}
}

// script makes the mock's next generations output texts in turn, each
// ending at the end of sequence (finish "stop"), the last for all later
// ones: one text per step of an agent's loop.
func (s *toolStack) script(t *testing.T, texts ...string) {
	t.Helper()
	scripts := make([]map[string]any, len(texts))
	for i, text := range texts {
		ids, err := s.tok.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		scripts[i] = map[string]any{"tokens": ids, "eos": true}
	}
	if len(scripts) == 1 {
		s.m.post(t, "/script", scripts[0])
		return
	}
	s.m.post(t, "/script", map[string]any{"scripts": scripts})
}

// prompt is the engine's last prompt, decoded with its special tokens.
func (s *toolStack) prompt(t *testing.T) string {
	t.Helper()
	p, err := s.tok.Decode(s.m.state(t).LastPrompt, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkPrompt checks that the engine's last prompt holds each of want and
// none of unwanted.
func (s *toolStack) checkPrompt(t *testing.T, want, unwanted []string) {
	t.Helper()
	p := s.prompt(t)
	for _, w := range want {
		if !strings.Contains(p, w) {
			t.Errorf("the engine got the prompt\n%s\nwant it to hold %q", p, w)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(p, u) {
			t.Errorf("the engine got the prompt\n%s\nwant it without %q", p, u)
		}
	}
}

// hermesCall is a call as Qwen3 writes it, the Hermes format its template
// asks for (the chat_template in Qwen3's tokenizer_config.json; vLLM's
// vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py).
func hermesCall(name, args string) string {
	return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
}

// The fixed values the tools of testdata/apps/apps.mjs return, and the
// Qwen3 template's rendering of them as tool results in the next prompt.
const (
	weatherResult = "sunny, 21 C in Paris"
	timeResult    = "14:05 in Paris"
	paris         = `{"city": "Paris"}`
)

func toolResponse(result string) string { return "<tool_response>\n" + result + "\n</tool_response>" }

// replayedCall is the start of the Qwen3 template's rendering of an
// assistant turn's call (the arguments follow as the client replays them).
func replayedCall(name string) string {
	return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": "
}

// aiLoop is what an AI SDK tool loop gave (apps.mjs's steps).
type aiLoop struct {
	Text, Finish string
	Streamed     *string // streamText's text of every step
	Steps        []struct {
		Finish, Text string
		Calls        []struct {
			Name  string
			Input map[string]any
			ID    string
		}
		Results []struct {
			Name, ID string
			Output   any
		}
	}
}

// check checks a two-step loop: step one wrote lead, then called
// get_weather and get_time for Paris (ids set and distinct) and ran them;
// step two answered text.
func (l aiLoop) check(t *testing.T, lead, answer string) {
	t.Helper()
	if len(l.Steps) != 2 {
		t.Fatalf("the loop took %d steps, want 2 (the calls, then the answer): %+v", len(l.Steps), l)
	}
	one, two := l.Steps[0], l.Steps[1]
	city := map[string]any{"city": "Paris"}
	if one.Finish != "tool-calls" || strings.TrimSpace(one.Text) != lead || len(one.Calls) != 2 || one.Calls[0].Name != "get_weather" || one.Calls[1].Name != "get_time" ||
		!reflect.DeepEqual(one.Calls[0].Input, city) || !reflect.DeepEqual(one.Calls[1].Input, city) ||
		one.Calls[0].ID == "" || one.Calls[0].ID == one.Calls[1].ID {
		t.Errorf("step one: %+v, want finish tool-calls, the text %q, the calls get_weather and get_time with input %v and distinct ids", one, lead, city)
	}
	if len(one.Results) != 2 || one.Results[0].Output != weatherResult || one.Results[1].Output != timeResult {
		t.Errorf("step one's tool results %+v, want %q and %q", one.Results, weatherResult, timeResult)
	}
	if two.Finish != "stop" || two.Text != answer || len(two.Calls) != 0 || l.Text != answer || l.Finish != "stop" {
		t.Errorf("step two: %+v (loop text %q, finish %q), want the answer %q with finish stop", two, l.Text, l.Finish, answer)
	}
	if l.Streamed != nil && (!strings.HasPrefix(*l.Streamed, lead) || !strings.HasSuffix(*l.Streamed, answer)) {
		t.Errorf("streamed text %q, want step one's %q, then %q", *l.Streamed, lead, answer)
	}
}

// TestToolApps: issue 27's tool calling and reasoning through vigil route
// to a vLLM worker with Qwen3's tokenizer, with the real npm clients
// (pinned in testdata/apps), each step's output scripted: the AI SDK's
// generateText with two tools and stopWhen completes a two-step loop
// through openai.chat(model) and through the default Responses provider
// (store default: the calls go back as item_reference), and streamed with
// streamText; the openai package's Responses stream of a call; LangChain's
// bindTools with invoke, whole and streamed; the openai package's runTools
// loop, whole and streamed; and a thinking model's reasoning_content then a
// call, in one stream. Step two's prompt holds step one's text, the
// replayed calls and the tools' results as the Qwen3 template renders them.
func TestToolApps(t *testing.T) {
	skipShort(t)
	t.Parallel()
	s := startToolStack(t)
	// Step one's text before the calls goes back, with the Responses
	// provider, as an item_reference to its message (the calls go whole).
	const lead, answer = "Let me check.", "It is sunny, 21 C, and 14:05 in Paris."
	loopPrompt := []string{"<tools>", "<|im_start|>assistant\n" + lead, replayedCall("get_weather"), replayedCall("get_time"),
		toolResponse(weatherResult), toolResponse(timeResult), "What is the weather and the time in Paris?"}

	for _, name := range []string{"ai-tools-chat", "ai-tools-responses", "ai-tools-responses-stream"} {
		t.Run(name, func(t *testing.T) {
			s.script(t, lead+"\n"+hermesCall("get_weather", paris)+"\n"+hermesCall("get_time", paris), answer)
			var got aiLoop
			runApp(t, s.base, s.model, name, &got)
			got.check(t, lead, answer)
			s.checkPrompt(t, loopPrompt, []string{"<think>"})
		})
	}
	t.Run("openai-responses-tools", func(t *testing.T) { testResponsesToolStream(t, s) })
	t.Run("langchain-tools", func(t *testing.T) { testLangChainTools(t, s) })
	t.Run("openai-run-tools", func(t *testing.T) {
		const weather = "It is sunny, 21 C in Paris."
		call := hermesCall("get_weather", paris)
		s.script(t, call, weather, call, weather)
		type loop struct {
			Content     string
			Roles       []string
			Completions int
		}
		var got struct {
			Whole, Streamed loop
			Args            []map[string]any
		}
		runApp(t, s.base, s.model, "openai-run-tools", &got)
		want := loop{weather, []string{"user", "assistant", "tool", "assistant"}, 2}
		for name, l := range map[string]loop{"whole": got.Whole, "streamed": got.Streamed} {
			if !reflect.DeepEqual(l, want) {
				t.Errorf("%s: runTools got %+v, want %+v", name, l, want)
			}
		}
		if city := map[string]any{"city": "Paris"}; !reflect.DeepEqual(got.Args, []map[string]any{city, city}) {
			t.Errorf("the function ran with %v, want %v once a loop", got.Args, city)
		}
		s.checkPrompt(t, []string{replayedCall("get_weather"), toolResponse(weatherResult)}, nil)
	})
	t.Run("thinking", func(t *testing.T) { testThinkingTools(t, s) })
}

// testResponsesToolStream: the openai package's streamed Responses call
// gets the function_call item added, its arguments' deltas and done, the
// item done and response.completed with the call in its output.
func testResponsesToolStream(t *testing.T, s *toolStack) {
	s.script(t, hermesCall("get_weather", paris))
	var got struct {
		Events []string
		Args   string
		Status string
		Calls  []struct{ Name, Arguments, CallID, ID, Status string }
	}
	runApp(t, s.base, s.model, "openai-responses-tools", &got)
	order := []string{"response.created", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	at := 0
	for _, e := range got.Events {
		if at < len(order) && e == order[at] {
			at++
		}
	}
	if at != len(order) || got.Events[len(got.Events)-1] != "response.completed" {
		t.Errorf("events %v, want in order %v", got.Events, order)
	}
	var args map[string]any
	if json.Unmarshal([]byte(got.Args), &args) != nil || args["city"] != "Paris" {
		t.Errorf("arguments' deltas joined %q, want the JSON %s", got.Args, paris)
	}
	if len(got.Calls) != 1 || got.Status != "completed" {
		t.Fatalf("final response %+v, want completed with one function_call", got)
	}
	c := got.Calls[0]
	if c.Name != "get_weather" || c.Arguments != got.Args || c.CallID == "" || c.ID == "" || c.Status != "completed" {
		t.Errorf("function_call %+v, want get_weather with the streamed arguments, a call_id, an id, completed", c)
	}
}

// langchainResult is what apps.mjs's langchainCalls gives of a message.
type langchainResult struct {
	Content string
	Calls   []struct {
		Name, ID string
		Args     map[string]any
	}
	Invalid   []any
	Reasoning *string
}

func (r langchainResult) checkCall(t *testing.T, name string) {
	t.Helper()
	if len(r.Calls) != 1 || r.Calls[0].Name != "get_weather" || r.Calls[0].ID == "" ||
		!reflect.DeepEqual(r.Calls[0].Args, map[string]any{"city": "Paris"}) || len(r.Invalid) != 0 {
		t.Errorf("%s: tool_calls %+v (invalid %v), want get_weather with args {city: Paris} and an id", name, r.Calls, r.Invalid)
	}
	if strings.TrimSpace(r.Content) != "" {
		t.Errorf("%s: content %q, want none: the call's markup is not content", name, r.Content)
	}
}

// testLangChainTools: LangChain's bindTools, invoke and stream (chunks
// concatenated), gets the call parsed into tool_calls.
func testLangChainTools(t *testing.T, s *toolStack) {
	s.script(t, hermesCall("get_weather", paris))
	var got struct{ Whole, Streamed langchainResult }
	runApp(t, s.base, s.model, "langchain-tools", &got)
	got.Whole.checkCall(t, "invoke")
	got.Streamed.checkCall(t, "stream")
	s.checkPrompt(t, []string{"<tools>", `"name": "get_weather"`, `"name": "get_time"`}, nil)
}

// callDelta is a delta.tool_calls entry as the openai package passes it.
type callDelta struct {
	Index    *int
	ID       string
	Type     string
	Function struct{ Name, Arguments string }
}

// thinkingStream is apps.mjs's openai-thinking-tools stream: its deltas
// in order, each reasoning, content or a call's piece.
type thinkingStream struct {
	Deltas []struct {
		Reasoning, Content *string
		Call               *callDelta
	}
	Finish string
}

// check checks that the stream's reasoning is thought, all of it before the
// call; that content holds no markup; and that the call came as OpenAI
// streams one: index 0, id, type and name first, then the arguments alone.
func (s thinkingStream) check(t *testing.T, thought string) {
	t.Helper()
	var reasoning, content, args strings.Builder
	var calls []callDelta
	for i, d := range s.Deltas {
		switch {
		case d.Reasoning != nil:
			reasoning.WriteString(*d.Reasoning)
			if len(calls) > 0 {
				t.Errorf("delta %d: reasoning %q after the call", i, *d.Reasoning)
			}
		case d.Content != nil:
			content.WriteString(*d.Content)
		case d.Call != nil:
			calls = append(calls, *d.Call)
			args.WriteString(d.Call.Function.Arguments)
		}
	}
	checkThought(t, "stream", reasoning.String(), content.String(), thought)
	if len(calls) == 0 {
		t.Fatalf("stream: no delta.tool_calls in %+v", s.Deltas)
	}
	first := calls[0]
	if first.Index == nil || *first.Index != 0 || first.ID == "" || first.Type != "function" || first.Function.Name != "get_weather" {
		t.Errorf("stream: first tool_calls delta %+v, want index 0, an id, type function, name get_weather", first)
	}
	for i, c := range calls[1:] {
		if c.Index == nil || *c.Index != 0 || c.ID != "" || c.Function.Name != "" {
			t.Errorf("stream: tool_calls delta %d %+v, want index 0 and arguments alone", i+1, c)
		}
	}
	checkArgs(t, "stream", args.String())
	if s.Finish != "tool_calls" {
		t.Errorf("stream: finish_reason %q, want tool_calls", s.Finish)
	}
}

// testThinkingTools: a Qwen3 answer that thinks, then calls: the stream
// carries the thinking as delta.reasoning_content, then the call as
// delta.tool_calls, finish_reason tool_calls, no markup in content or
// reasoning (thinkingStream.check); the same not streamed
// (message.reasoning_content) and through LangChain's stream
// (additional_kwargs.reasoning_content).
func testThinkingTools(t *testing.T, s *toolStack) {
	const thought = "I should check the weather."
	s.script(t, "<think>\n"+thought+"\n</think>\n\n"+hermesCall("get_weather", paris))
	var got struct {
		thinkingStream
		Whole struct {
			Content, Reasoning *string
			Calls              []callDelta
			Finish             string
		}
		LangChain langchainResult
	}
	runApp(t, s.base, s.model, "openai-thinking-tools", &got)
	got.thinkingStream.check(t, thought)
	w := got.Whole
	checkThought(t, "whole", deref(w.Reasoning), deref(w.Content), thought)
	if len(w.Calls) != 1 || w.Calls[0].Function.Name != "get_weather" || w.Calls[0].ID == "" || w.Finish != "tool_calls" {
		t.Errorf("whole: tool_calls %+v finish %q, want get_weather with an id, finish tool_calls", w.Calls, w.Finish)
	} else {
		checkArgs(t, "whole", w.Calls[0].Function.Arguments)
	}
	got.LangChain.checkCall(t, "LangChain stream")
	checkThought(t, "LangChain stream", deref(got.LangChain.Reasoning), got.LangChain.Content, thought)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// checkThought checks that reasoning is the thought (the whitespace around
// it as the parser keeps it) and that neither it nor content holds markup.
func checkThought(t *testing.T, name, reasoning, content, thought string) {
	t.Helper()
	if strings.TrimSpace(reasoning) != thought || strings.Contains(reasoning, "<") {
		t.Errorf("%s: reasoning_content %q, want %q (no tags, no call)", name, reasoning, thought)
	}
	if strings.TrimSpace(content) != "" {
		t.Errorf("%s: content %q, want none (the thinking and the call are not content)", name, content)
	}
}

// checkArgs checks that a call's arguments are the JSON {"city": "Paris"}.
func checkArgs(t *testing.T, name, args string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal([]byte(args), &got); err != nil || !reflect.DeepEqual(got, map[string]any{"city": "Paris"}) {
		t.Errorf("%s: arguments %q, want the JSON %s", name, args, paris)
	}
}

// weatherTool is the tools array of the Go cases: get_weather alone.
const weatherTool = `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

// toolAnswer is a chat completion's choice, whole or its stream merged:
// content, reasoning_content, the calls (a stream's pieces joined by
// index) and finish_reason.
type toolAnswer struct {
	Content, Reasoning string
	Calls              []toolCallJSON
	Finish             string
}

type toolCallJSON struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolChoiceJSON struct {
	Message, Delta struct {
		Content   *string        `json:"content"`
		Reasoning *string        `json:"reasoning_content"`
		ToolCalls []toolCallJSON `json:"tool_calls"`
	}
	FinishReason *string `json:"finish_reason"`
}

// toolChat posts a chat asking for Paris's weather with the tools of
// weatherTool and more (JSON members, each with a leading comma), and
// returns the choice; anything but 200 fails t.
func (s *toolStack) toolChat(t *testing.T, more string, stream bool) toolAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":%s%s,"stream":%t}`,
		s.model, weatherTool, more, stream)
	code, _, resp := post(t, s.base+"/v1/chat/completions", body)
	if code != 200 {
		t.Fatalf("POST %s: %d %s, want 200", body, code, resp)
	}
	datas := []string{resp}
	if stream {
		var done bool
		if datas, done = sseData(resp); !done {
			t.Errorf("stream without [DONE]:\n%s", resp)
		}
	}
	var a toolAnswer
	for _, data := range datas {
		var ev struct{ Choices []toolChoiceJSON }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("answer %q: %v", data, err)
		}
		for _, c := range ev.Choices {
			a.add(c)
		}
	}
	return a
}

// add merges a choice, or a stream's chunk of one, into a.
func (a *toolAnswer) add(c toolChoiceJSON) {
	for i, tc := range c.Message.ToolCalls {
		tc.Index = i // a whole message's calls have no index
		a.addCall(tc)
	}
	for _, tc := range c.Delta.ToolCalls {
		a.addCall(tc)
	}
	a.Content += deref(c.Message.Content) + deref(c.Delta.Content)
	a.Reasoning += deref(c.Message.Reasoning) + deref(c.Delta.Reasoning)
	if c.FinishReason != nil {
		a.Finish = *c.FinishReason
	}
}

// addCall adds a call, or a stream's piece of one, to the call at its
// index.
func (a *toolAnswer) addCall(tc toolCallJSON) {
	for len(a.Calls) <= tc.Index {
		a.Calls = append(a.Calls, toolCallJSON{Index: len(a.Calls)})
	}
	at := &a.Calls[tc.Index]
	at.ID += tc.ID
	at.Type += tc.Type
	at.Function.Name += tc.Function.Name
	at.Function.Arguments += tc.Function.Arguments
}

// parseFailures is the worker's vigil_tool_call_parse_failures_total,
// summed over its labels (0 before any: a labelled counter appears once
// counted).
func (s *toolStack) parseFailures(t *testing.T) float64 {
	t.Helper()
	const name = "vigil_tool_call_parse_failures_total"
	sum := 0.0
	for series, v := range scrape(t, s.metrics) {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v
		}
	}
	return sum
}

// TestToolOutput: through vigil route to a vLLM worker with Qwen3's
// template and the hermes parser, output that is not a good call comes
// back as the text it is, never an error or a broken stream: a call whose
// arguments are not JSON, and one naming a function not offered, are
// content with finish_reason stop, whole and streamed, each counted once
// in vigil_tool_call_parse_failures_total; tool_choice none renders no
// tools and parses no calls, auto does both, and required constrains the
// engine with a JSON schema (vLLM's structured output) and parses its
// array of calls, whole and streamed; parallel_tool_calls false returns the
// first of two calls.
func TestToolOutput(t *testing.T) {
	skipShort(t)
	t.Parallel()
	s := startToolStack(t)
	t.Run("bad output", func(t *testing.T) {
		failures := 0.0
		for _, c := range []struct{ name, text string }{
			{"arguments not JSON", hermesCall("get_weather", `{"city": "Paris"`)},
			{"function not offered", hermesCall("get_stock", `{"symbol": "ACME"}`)},
		} {
			s.script(t, c.text)
			for _, stream := range []bool{false, true} {
				a := s.toolChat(t, "", stream)
				if a.Content != c.text || len(a.Calls) != 0 || a.Finish != "stop" {
					t.Errorf("%s, stream %t: %+v, want the output as content %q, no calls, finish stop", c.name, stream, a, c.text)
				}
				failures++
				awaitParseFailures(t, s, failures)
			}
		}
	})
	t.Run("tool_choice", func(t *testing.T) { testToolChoice(t, s) })
	t.Run("parallel_tool_calls false", func(t *testing.T) {
		s.script(t, hermesCall("get_weather", paris)+"\n"+hermesCall("get_weather", `{"city": "London"}`))
		for _, stream := range []bool{false, true} {
			a := s.toolChat(t, `,"parallel_tool_calls":false`, stream)
			if len(a.Calls) != 1 || a.Calls[0].Function.Name != "get_weather" || a.Finish != "tool_calls" || strings.TrimSpace(a.Content) != "" {
				t.Errorf("stream %t: got %+v, want the first call alone, finish tool_calls, no content", stream, a)
			} else {
				checkArgs(t, fmt.Sprintf("first call, stream %t", stream), a.Calls[0].Function.Arguments)
			}
		}
	})
}

// awaitParseFailures waits for the count to reach want (a metric has no
// event to await) and fails t if it does not, or passes it.
func awaitParseFailures(t *testing.T, s *toolStack, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.parseFailures(t)
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("vigil_tool_call_parse_failures_total = %v (0: absent), want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testToolChoice(t *testing.T, s *toolStack) {
	call := hermesCall("get_weather", paris)
	s.script(t, call)
	before := s.parseFailures(t)
	t.Run("none", func(t *testing.T) {
		a := s.toolChat(t, `,"tool_choice":"none"`, false)
		if a.Content != call || len(a.Calls) != 0 || a.Finish != "stop" {
			t.Errorf("got %+v, want the output as content %q (no parsing), no calls, finish stop", a, call)
		}
		s.checkPrompt(t, []string{"What is the weather in Paris?"}, []string{"<tools>", "# Tools", "get_weather"})
		if got := s.parseFailures(t); got != before {
			t.Errorf("parse failures %v, want %v: nothing parsed", got, before)
		}
	})
	t.Run("auto", func(t *testing.T) {
		a := s.toolChat(t, `,"tool_choice":"auto"`, false)
		if len(a.Calls) != 1 || a.Calls[0].Function.Name != "get_weather" || a.Finish != "tool_calls" || strings.TrimSpace(a.Content) != "" {
			t.Errorf("got %+v, want the get_weather call, finish tool_calls, no content", a)
		} else {
			checkArgs(t, "auto", a.Calls[0].Function.Arguments)
		}
		s.checkPrompt(t, []string{"<tools>", `"name": "get_weather"`}, nil)
	})
	t.Run("required", func(t *testing.T) {
		// vLLM's server parses required's output as a JSON array of
		// {name, parameters} (vllm/entrypoints/openai/serving_chat.py).
		s.script(t, `[{"name": "get_weather", "parameters": {"city": "Paris"}}]`)
		for _, stream := range []bool{false, true} {
			a := s.toolChat(t, `,"tool_choice":"required"`, stream)
			if len(a.Calls) != 1 || a.Calls[0].Function.Name != "get_weather" || a.Calls[0].ID == "" || a.Finish != "tool_calls" || a.Content != "" {
				t.Errorf("stream %t: got %+v, want the get_weather call with an id, finish tool_calls, no content", stream, a)
			} else {
				checkArgs(t, fmt.Sprintf("required, stream %t", stream), a.Calls[0].Function.Arguments)
			}
			checkEngineArraySchema(t, s.m)
		}
	})
}

// checkEngineArraySchema checks that the engine's last request carried a
// JSON schema guide (vLLM's DecodingParameters.json) of an array of calls
// of get_weather.
func checkEngineArraySchema(t *testing.T, m *mock) {
	t.Helper()
	text, last := engineSchema(t, m)
	var schema struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(text), &schema) != nil || schema.Type != "array" || !strings.Contains(text, "get_weather") {
		t.Errorf("engine's last request %s: want decoding.json, a schema of an array of calls naming get_weather", last)
	}
}
