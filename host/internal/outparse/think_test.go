package outparse

import "testing"

func TestThink(t *testing.T) {
	t.Parallel()
	in := Options{InReasoning: true}
	run(t, []tcase{
		{name: "qwen3 block then answer", reasoning: "qwen3", out: "<think>\nThe user greets.\n</think>\n\nHello!",
			want: Whole{Reasoning: "\nThe user greets.\n", Content: "\n\nHello!"}},
		{name: "qwen3 block opened by the prompt", reasoning: "qwen3", opts: in, out: "Short.\n</think>\n\nHi",
			want: Whole{Reasoning: "Short.\n", Content: "\n\nHi"}},
		{name: "qwen3 no block is content", reasoning: "qwen3", out: "Hello, <b>world</b> </thin",
			want: Whole{Content: "Hello, <b>world</b> </thin"}},
		{name: "qwen3 leading whitespace before the block", reasoning: "qwen3", out: "\n<think>a</think>b",
			want: Whole{Reasoning: "a", Content: "b"}},
		{name: "qwen3 unclosed block at the end is reasoning", reasoning: "qwen3", out: "<think>still thinking",
			want: Whole{Reasoning: "still thinking"}},
		{name: "qwen3 thinking off", reasoning: "qwen3", opts: Options{ReasoningOff: true}, out: "<think>x</think>y",
			want: Whole{Content: "<think>x</think>y"}},
		{name: "qwen3 whitespace only", reasoning: "qwen3", out: "\n\n", want: Whole{Content: "\n\n"}},
		{name: "r1 without the opening tag", reasoning: "deepseek_r1", out: "Let me see.</think>The answer is 4.",
			want: Whole{Reasoning: "Let me see.", Content: "The answer is 4."}},
		{name: "r1 with the opening tag", reasoning: "deepseek_r1", out: "<think>Hmm</think>4",
			want: Whole{Reasoning: "Hmm", Content: "4"}},
		{name: "r1 without the closing tag is all reasoning", reasoning: "deepseek_r1", out: "Hmm, 2+2 is",
			want: Whole{Reasoning: "Hmm, 2+2 is"}},
		{name: "a later </think> is content", reasoning: "qwen3", out: "<think>a</think>b</think>c",
			want: Whole{Reasoning: "a", Content: "b</think>c"}},
		{name: "none passes all", reasoning: "none", out: "<think>a</think>b", want: Whole{Content: "<think>a</think>b"}},
	})
}

func TestPromptOpensReasoning(t *testing.T) {
	t.Parallel()
	for prompt, want := range map[string]bool{
		"<|im_start|>assistant\n<think>\n":                        true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":          false,
		"<think>old</think>answer<|im_start|>assistant\n":         false,
		"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n": false,
		"<think>a</think>b<|im_start|>assistant\n<think>\n":       true,
	} {
		if got := PromptOpensReasoning(prompt); got != want {
			t.Errorf("PromptOpensReasoning(%q) = %v, want %v", prompt, got, want)
		}
	}
}
