package outparse

import "strings"

// signs are the markup by which a chat template tells its family's
// parsers: a template that writes a family's call markup is trained on
// it. Checked in order; the first family whose sign is there wins only
// when no other tool family's sign is (ambiguous: none).
var toolSigns = []struct{ sign, parser string }{
	{"<tool_call>", "hermes"},
	{"<|python_tag|>", "llama3_json"},
	{"[TOOL_CALLS]", "mistral"},
	{"<｜tool▁calls▁begin｜>", "deepseek_v3"},
	{"<|channel|>", "openai"},
}

// Detect returns the parsers a chat template's source implies: the
// tool-call parser of the one family whose call markup it writes, and
// the reasoning parser of its thinking markup ("<think>": deepseek_r1
// for DeepSeek's templates, which open the block in the prompt, else
// qwen3; harmony's channels: openai_gptoss). "" where nothing, or more
// than one family, is found, and for a parser Detect's names are not
// registered under.
func Detect(template string) (reasoning, toolCall string) {
	for _, s := range toolSigns {
		if strings.Contains(template, s.sign) {
			if toolCall != "" {
				toolCall = ""
				break
			}
			toolCall = s.parser
		}
	}
	switch {
	case strings.Contains(template, "<|channel|>"):
		reasoning = "openai_gptoss"
	case strings.Contains(template, thinkOpen) && strings.Contains(template, "<｜Assistant｜>"):
		reasoning = "deepseek_r1"
	case strings.Contains(template, thinkOpen):
		reasoning = "qwen3"
	}
	if _, ok := toolCallParsers[toolCall]; !ok {
		toolCall = ""
	}
	if _, ok := reasoningParsers[reasoning]; !ok {
		reasoning = ""
	}
	return reasoning, toolCall
}
