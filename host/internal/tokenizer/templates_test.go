package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolLoop is a whole tool loop: tools offered, two calls, their
// results, the answer, and the next question.
var toolLoop = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Weather and time in Paris?"},
	{Role: "assistant", ReasoningContent: "Two tools.", ToolCalls: []ToolCall{
		{ID: "call_1", Type: "function", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`},
		{ID: "call_2", Type: "function", Name: "get_time", Arguments: `{"tz": "Europe/Paris"}`},
	}},
	{Role: "tool", ToolCallID: "call_1", Content: `{"temp": 20}`},
	{Role: "tool", ToolCallID: "call_2", Content: "14:05"},
	{Role: "assistant", Content: "20 °C at 14:05."},
	{Role: "user", Content: "Thanks. And Rome?"},
}

const loopTools = `[{"type": "function", "function": {"name": "get_weather", "description": "Current weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
	{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]`

// TestSyntheticToolTemplates: testdata/templates' templates, written
// for the parsers' end-to-end tests, render a tool loop in their
// family's documented format.
func TestSyntheticToolTemplates(t *testing.T) {
	t.Parallel()
	dir := modelDir(t, map[string]string{
		TokenizerFile:       string(tinyTokenizer(t, "BPE")),
		TokenizerConfigFile: `{"bos_token": "<s>", "eos_token": "</s>"}`,
	})
	for file, want := range map[string][]string{
		"llama3_json.jinja": {
			"Environment: ipython\n\n", "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions",
			`"name": "get_weather"`,
			`<|start_header_id|>assistant<|end_header_id|>` + "\n\n" + `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}; {"name": "get_time", "parameters": {"tz": "Europe/Paris"}}<|eom_id|>`,
			"<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 20}<|eot_id|>",
			"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		},
		"mistral.jinja": {
			`[INST]Weather and time in Paris?[/INST][TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}, "id": "call_1"}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}, "id": "call_2"}]</s>`,
			`[TOOL_RESULTS]{"content": "{\"temp\": 20}", "call_id": "call_1"}[/TOOL_RESULTS][TOOL_RESULTS]{"content": "14:05", "call_id": "call_2"}[/TOOL_RESULTS]20 °C at 14:05.</s>`,
			`[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather"`, `[/AVAILABLE_TOOLS][INST]Be brief.` + "\n\nThanks. And Rome?[/INST]",
		},
		"deepseek_v3.jinja": {
			"## Tools", "### get_weather",
			"<｜User｜>Weather and time in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"Europe/Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
			"<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{\"temp\": 20}<｜tool▁output▁end｜><｜tool▁output▁begin｜>14:05<｜tool▁output▁end｜><｜tool▁outputs▁end｜><｜Assistant｜>20 °C at 14:05.<｜end▁of▁sentence｜>",
			"<｜User｜>Thanks. And Rome?<｜Assistant｜>",
		},
		"gpt_oss.jinja": {
			"<|start|>system<|message|>", "Calls to these tools must go to the commentary channel: 'functions'.<|end|>",
			"<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n// Current weather.\ntype get_weather = (_: {\n// City name\ncity: string,\nunit?: \"celsius\" | \"fahrenheit\",\n}) => any;\n\ntype get_time = (_: {\ntz?: string,\n}) => any;\n\n} // namespace functions<|end|>",
			"<|start|>assistant<|channel|>analysis<|message|>Two tools.<|end|>",
			"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|call|>",
			"<|start|>functions.get_time to=assistant<|channel|>commentary<|message|>14:05<|end|>",
			"<|start|>assistant<|channel|>final<|message|>20 °C at 14:05.<|end|><|start|>user<|message|>Thanks. And Rome?<|end|><|start|>assistant",
		},
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			tok, err := Load(dir, filepath.Join("testdata", "templates", file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.RenderChatWith(toolLoop, ChatOptions{AddGenerationPrompt: true, Tools: loopTools})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("rendering lacks %q:\n%s", w, got)
				}
			}
			if !strings.HasSuffix(got, want[len(want)-1]) {
				t.Errorf("rendering ends %q, want the generation prompt %q", got[max(len(got)-40, 0):], want[len(want)-1])
			}
			// Without tools the template renders no tool listing.
			plain, err := tok.RenderChatWith(toolLoop[:2], ChatOptions{AddGenerationPrompt: true})
			if err != nil || strings.Contains(plain, "get_weather") {
				t.Errorf("without tools: %q, %v; want no tool listed", plain, err)
			}
			src, _ := os.ReadFile(filepath.Join("testdata", "templates", file))
			if tok.TemplateSource() != string(src) {
				t.Error("TemplateSource() is not the file's text")
			}
		})
	}
}
