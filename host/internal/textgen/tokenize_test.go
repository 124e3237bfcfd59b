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
		Name                string          `json:"name"`
		Messages            []refMessage    `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		Kwargs              json.RawMessage `json:"kwargs"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		IDs                 []uint32        `json:"ids"`
	} `json:"chats"`
}

// refMessage is a reference chat's message, in OpenAI's shape.
type refMessage struct {
	Role, Content, Name string
	ToolCallID          string `json:"tool_call_id"`
	ReasoningContent    string `json:"reasoning_content"`
	ToolCalls           []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// proto is m as the worker API carries it (arguments as JSON text).
func (m refMessage) proto() *workerv1.Message {
	out := &workerv1.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallId: m.ToolCallID, ReasoningContent: m.ReasoningContent}
	for _, c := range m.ToolCalls {
		args := string(c.Function.Arguments)
		var text string
		if json.Unmarshal(c.Function.Arguments, &text) == nil {
			args = text
		}
		out.ToolCalls = append(out.ToolCalls, &workerv1.ToolCall{Id: c.ID, Type: "function", Name: c.Function.Name, Arguments: args})
	}
	return out
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
	checkChats(t, e, ref)
}

// TestTokenizeToolChats: Qwen 3's reference chats, tool loops and
// reasoning included, tokenize as python3-jinja2 and the reference
// tokenizer make them.
func TestTokenizeToolChats(t *testing.T) {
	t.Parallel()
	e, ref := fixture(t, "qwen3")
	checkChats(t, e, ref)
}

// checkChats tokenizes ref's chats as Generate renders them.
func checkChats(t *testing.T, e *Engine, ref reference) {
	t.Helper()
	for _, c := range ref.Chats {
		msgs := &workerv1.Messages{}
		if len(c.Tools) > 0 {
			msgs.Tools = string(c.Tools)
		}
		if len(c.Kwargs) > 0 {
			msgs.ChatTemplateKwargs = string(c.Kwargs)
		}
		for _, m := range c.Messages {
			msgs.Messages = append(msgs.Messages, m.proto())
		}
		r, err := e.Tokenize(&workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Messages{Messages: msgs},
			AddGenerationPrompt: proto.Bool(c.AddGenerationPrompt)})
		if err != nil {
			t.Fatalf("chat %s: %v", c.Name, err)
		}
		if diff := cmp.Diff(c.IDs, r.GetTokenIds()); diff != "" {
			t.Errorf("chat %s: ids (-reference +got):\n%s", c.Name, diff)
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
