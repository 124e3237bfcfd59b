package textgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vigilhq/vigil/host/internal/tokenizer"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// reference is the Llama 3 fixture model's tokenizer and its reference
// tokenizations, or a skip without them (make tokenizer-models).
type reference struct {
	Texts []struct {
		Name             string   `json:"name"`
		Text             string   `json:"text"`
		AddSpecialTokens bool     `json:"add_special_tokens"`
		IDs              []uint32 `json:"ids"`
	} `json:"texts"`
	Chats []struct {
		Name                string              `json:"name"`
		Messages            []tokenizer.Message `json:"messages"`
		AddGenerationPrompt bool                `json:"add_generation_prompt"`
		Tools               json.RawMessage     `json:"tools"`
		Kwargs              json.RawMessage     `json:"kwargs"`
		IDs                 []uint32            `json:"ids"`
	} `json:"chats"`
}

func llama3(t *testing.T) (*Engine, reference) { return fixture(t, "llama3") }

// fixture is family's fixture model (llama3, qwen3, gemma3) as an Engine,
// and its reference tokenizations.
func fixture(t *testing.T, family string) (*Engine, reference) {
	t.Helper()
	dir := filepath.Join("..", "tokenizer", "testdata", "models", family)
	if _, err := os.Stat(filepath.Join(dir, tokenizer.TokenizerFile)); err != nil {
		if os.Getenv("VIGIL_REQUIRE_TOKENIZER_MODELS") != "" {
			t.Fatalf("%s missing: run make tokenizer-models", dir)
		}
		t.Skipf("%s missing: run make tokenizer-models", dir)
	}
	tok, err := tokenizer.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	b, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", family+".json"))
	if err == nil {
		err = json.Unmarshal(b, &ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	return New(&echo{}, HF(tok), 8192), ref
}

// Tokenize gives the reference tokenizer's ids for texts, with and
// without special tokens, and for chats rendered as Generate renders
// them; Detokenize gives the text back; token_strs are the vocabulary's
// entries, one per id.
func TestTokenizeMatchesReference(t *testing.T) {
	t.Parallel()
	e, ref := llama3(t)
	if !e.CanTokenize() {
		t.Fatal("CanTokenize false with the HF tokenizer")
	}
	for _, x := range ref.Texts {
		r, err := e.Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Text{Text: x.Text},
			AddSpecialTokens: proto.Bool(x.AddSpecialTokens), ReturnTokenStrs: true})
		if err != nil {
			t.Fatalf("%s: %v", x.Name, err)
		}
		if diff := cmp.Diff(x.IDs, r.GetTokenIds(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (special %v): ids (-reference +got):\n%s", x.Name, x.AddSpecialTokens, diff)
		}
		if len(r.GetTokenStrs()) != len(x.IDs) || r.GetMaxModelLen() != 8192 {
			t.Errorf("%s: %d token_strs for %d ids, max_model_len %d; want one each, 8192", x.Name, len(r.GetTokenStrs()), len(x.IDs), r.GetMaxModelLen())
		}
		d, err := e.Detokenize(&workerv1.DetokenizeRequest{TokenIds: r.GetTokenIds()})
		if err != nil || (!x.AddSpecialTokens && d.GetText() != x.Text) {
			t.Errorf("%s: detokenized %q, %v; want %q", x.Name, d.GetText(), err, x.Text)
		}
	}
	tokenizeChats(t, e, ref)
}

// Qwen 3's template renders tools, tool calls, tool results and
// reasoning: the reference chats holding them, sent as the worker API's
// Messages, give the reference ids.
func TestTokenizeToolChatsMatchReference(t *testing.T) {
	t.Parallel()
	e, ref := fixture(t, "qwen3")
	tokenizeChats(t, e, ref)
}

// tokenizeChats checks that each reference chat, as the worker API's
// Messages, tokenizes to the reference ids.
func tokenizeChats(t *testing.T, e *Engine, ref reference) {
	t.Helper()
	for _, c := range ref.Chats {
		if c.IDs == nil {
			continue // the template refuses it
		}
		msgs := &workerv1.Messages{Tools: string(c.Tools)}
		if c.Kwargs != nil {
			msgs.ChatTemplateKwargs = string(c.Kwargs)
		}
		for _, m := range c.Messages {
			wm := &workerv1.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallId: m.ToolCallID, ReasoningContent: m.ReasoningContent}
			for _, tc := range m.ToolCalls {
				wm.ToolCalls = append(wm.ToolCalls, &workerv1.ToolCall{Id: tc.ID, Type: tc.Type, Name: tc.Name, Arguments: tc.Arguments})
			}
			msgs.Messages = append(msgs.Messages, wm)
		}
		r, err := e.Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Messages{Messages: msgs},
			AddGenerationPrompt: proto.Bool(c.AddGenerationPrompt)})
		if err != nil {
			t.Fatalf("chat %s: %v", c.Name, err)
		}
		if diff := cmp.Diff(c.IDs, r.GetTokenIds()); diff != "" {
			t.Errorf("chat %s (add_generation_prompt %v): ids (-reference +got):\n%s", c.Name, c.AddGenerationPrompt, diff)
		}
	}
}

// The token strings are the byte-level vocabulary's entries, as vLLM's
// return_token_strs; an id outside the vocabulary is refused naming
// token_ids.
func TestTokenStrs(t *testing.T) {
	t.Parallel()
	e, _ := llama3(t)
	r, err := e.Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Text{Text: "Hello world"}, ReturnTokenStrs: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Hello", "Ġworld"}, r.GetTokenStrs()); diff != "" {
		t.Errorf("token_strs (-want +got):\n%s", diff)
	}
	_, err = e.Detokenize(&workerv1.DetokenizeRequest{TokenIds: []uint32{1 << 30}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !hasPrefix(st.Message(), "token_ids:") {
		t.Errorf("an id outside the vocabulary: %v, want INVALID_ARGUMENT naming token_ids", err)
	}
}

// With Gemma 3 (whose tokenizer adds <bos>, id 2): a text gets it unless
// add_special_tokens is false; a chat does not add it again (its template
// writes it) unless add_special_tokens is true, as vLLM; Qwen 3's
// template leaves out the assistant header with add_generation_prompt
// false.
func TestTokenizeSpecialTokensAndGenerationPrompt(t *testing.T) {
	t.Parallel()
	gemma, _ := fixture(t, "gemma3")
	ids := func(e *Engine, req *workerv1.TokenizeRequest) []uint32 {
		t.Helper()
		r, err := e.Tokenize(req)
		if err != nil {
			t.Fatal(err)
		}
		return r.GetTokenIds()
	}
	text := &workerv1.TokenizeRequest_Text{Text: "Hello"}
	if with, without := ids(gemma, &workerv1.TokenizeRequest{Input: text}),
		ids(gemma, &workerv1.TokenizeRequest{Input: text, AddSpecialTokens: proto.Bool(false)}); !cmp.Equal(with, append([]uint32{2}, without...)) {
		t.Errorf("text: %v by default, %v without special tokens; want <bos> (2) only in the first", with, without)
	}
	chat := &workerv1.TokenizeRequest_Messages{Messages: &workerv1.Messages{Messages: []*workerv1.Message{{Role: "user", Content: "hi"}}}}
	plain, special := ids(gemma, &workerv1.TokenizeRequest{Input: chat}), ids(gemma, &workerv1.TokenizeRequest{Input: chat, AddSpecialTokens: proto.Bool(true)})
	if plain[0] != 2 || plain[1] == 2 || !cmp.Equal(special, append([]uint32{2}, plain...)) {
		t.Errorf("chat: %v by default, %v with add_special_tokens; want one <bos>, then two", plain, special)
	}
	qwen, _ := fixture(t, "qwen3")
	with, without := ids(qwen, &workerv1.TokenizeRequest{Input: chat}), ids(qwen, &workerv1.TokenizeRequest{Input: chat, AddGenerationPrompt: proto.Bool(false)})
	if len(without) >= len(with) || !cmp.Equal(with[:len(without)], without) {
		t.Errorf("add_generation_prompt false: %v, want a prefix of %v without the assistant header", without, with)
	}
}

// A tokenizer without a Vocab serves no Tokenize.
func TestCanTokenizeNeedsVocab(t *testing.T) {
	t.Parallel()
	if New(&echo{}, byteTokenizer{}, 0).CanTokenize() {
		t.Error("CanTokenize true for a tokenizer without EncodeRaw and Tokens")
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Tool choice none leaves the tools out of the prompt; bad tools and
// arguments are refused naming the field.
func TestChatTools(t *testing.T) {
	t.Parallel()
	e, _ := fixture(t, "qwen3")
	const tools = `[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]`
	user := &workerv1.Message{Role: "user", Content: "hi"}
	ids := func(m *workerv1.Messages) ([]uint32, error) {
		r, err := e.Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Messages{Messages: m}})
		return r.GetTokenIds(), err
	}
	plain, err := ids(&workerv1.Messages{Messages: []*workerv1.Message{user}})
	if err != nil {
		t.Fatal(err)
	}
	offered, err := ids(&workerv1.Messages{Messages: []*workerv1.Message{user}, Tools: tools})
	if err != nil || len(offered) <= len(plain) {
		t.Fatalf("tools offered: %d ids, %v; want more than the %d without", len(offered), err, len(plain))
	}
	none := &workerv1.ToolChoice{Choice: &workerv1.ToolChoice_Mode{Mode: workerv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}}
	if got, err := ids(&workerv1.Messages{Messages: []*workerv1.Message{user}, Tools: tools, ToolChoice: none}); err != nil || !cmp.Equal(got, plain) {
		t.Errorf("tool_choice none: %v, %v; want the ids without tools", got, err)
	}
	call := &workerv1.Message{Role: "assistant", ToolCalls: []*workerv1.ToolCall{{Id: "c", Name: "f", Arguments: "[1]"}}}
	for name, c := range map[string]struct {
		m     *workerv1.Messages
		field string
	}{
		"arguments not an object": {&workerv1.Messages{Messages: []*workerv1.Message{user, call}}, "messages.messages[1].tool_calls[0].function.arguments: "},
		"tool unnamed":            {&workerv1.Messages{Messages: []*workerv1.Message{user}, Tools: `[{"function": {}}]`}, "messages.tools[0].function.name: "},
	} {
		_, err := ids(c.m)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !hasPrefix(st.Message(), c.field) {
			t.Errorf("%s: %v; want INVALID_ARGUMENT beginning %q", name, err, c.field)
		}
	}
}

// NewDecoder keeps the special tokens named in keep; a text that is not
// a special token changes nothing. TemplateSource is the template's text.
func TestHFKeepAndTemplateSource(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "tokenizer", "testdata", "models", "qwen3")
	tok, err := tokenizer.Load(dir, "")
	if err != nil {
		t.Skip(err)
	}
	out, err := tok.Encode("a<|im_end|><tool_call>b<|endoftext|>", false)
	if err != nil {
		t.Fatal(err)
	}
	h := HF(tok)
	for _, c := range []struct {
		keep []string
		want string
	}{
		{nil, "a<tool_call>b"},
		{[]string{"<|im_end|>"}, "a<|im_end|><tool_call>b"},
		{[]string{"<|im_end|>", "<tool_call>", "no such token", ""}, "a<|im_end|><tool_call>b"},
		{[]string{"<|endoftext|>", "<|im_end|>"}, "a<|im_end|><tool_call>b<|endoftext|>"},
	} {
		d := h.NewDecoder(nil, c.keep)
		if got := d.Next(out) + d.Flush(); got != c.want {
			t.Errorf("keep %q: %q, want %q", c.keep, got, c.want)
		}
	}
	if src := h.TemplateSource(); src != tok.TemplateSource() || src == "" {
		t.Errorf("TemplateSource() = %.40q, want Qwen3's template", src)
	}
}
