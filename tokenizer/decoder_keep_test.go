package tokenizer

import (
	"strings"
	"testing"
)

// TestDecoderKeep: the special tokens a parser reads stay in the text,
// the others are skipped, the same for every split of the ids; before
// the first Next, Keep also keeps them in the prompt's context.
func TestDecoderKeep(t *testing.T) {
	t.Parallel()
	tk, err := Load(modelsDir + "qwen3")
	if err != nil {
		t.Skipf("qwen3 model files: %v (make tokenizer-models)", err)
	}
	start, _ := tk.TokenID("<|im_start|>")
	end, _ := tk.TokenID("<|im_end|>")
	hello, _ := tk.TokenID("Hello")
	if !tk.IsSpecial(start) || !tk.IsSpecial(end) || tk.IsSpecial(hello) {
		t.Fatal("qwen3: <|im_start|> and <|im_end|> special, Hello not: the test's premise")
	}
	encode := func(s string) []uint32 {
		ids, err := tk.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	prompt := encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>")
	out := encode("assistant\nHello <|im_end|><|im_start|>tool x<|im_end|>")
	for name, c := range map[string]struct {
		keep []uint32
		want string
	}{
		"none":             {nil, "assistant\nHello tool x"},
		"one":              {[]uint32{start}, "assistant\nHello <|im_start|>tool x"},
		"two":              {[]uint32{start, end}, "assistant\nHello <|im_end|><|im_start|>tool x<|im_end|>"},
		"not special":      {[]uint32{hello}, "assistant\nHello tool x"},
		"outside vocab":    {[]uint32{1 << 30}, "assistant\nHello tool x"},
		"one, given twice": {[]uint32{start, start}, "assistant\nHello <|im_start|>tool x"},
	} {
		for _, size := range []int{1, 2, 3, len(out)} {
			d := tk.NewDecoder(true, prompt)
			d.Keep(c.keep...)
			var b strings.Builder
			for rest := out; len(rest) > 0; rest = rest[min(size, len(rest)):] {
				b.WriteString(d.Next(rest[:min(size, len(rest))]))
			}
			if got := b.String() + d.Flush(); got != c.want {
				t.Errorf("%s, pieces of %d: %q, want %q", name, size, got, c.want)
			}
		}
	}
	// Keep after the first Next applies to the ids that follow.
	d := tk.NewDecoder(true, prompt)
	got := d.Next([]uint32{start})
	d.Keep(start)
	if got += d.Next([]uint32{hello, start}) + d.Flush(); got != "Hello<|im_start|>" {
		t.Errorf("Keep after Next: %q, want %q", got, "Hello<|im_start|>")
	}
}
