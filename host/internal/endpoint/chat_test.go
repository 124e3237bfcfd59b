package endpoint

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"github.com/vigilhq/vigil/host/internal/workerapi"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenized wraps engines with vigil run's tokenization, by tok, for a
// model of maxLen tokens.
func tokenized(tok textgen.Tokenizer, maxLen uint32) func(sdk.Generator) sdk.Generator {
	return func(g sdk.Generator) sdk.Generator { return textgen.New(g, tok, maxLen) }
}

// fakeTokenizer renders each message as its role's length then one token
// per byte of its content; a role "bad" fails, as a template that raises.
// Text encodes as a BOS (1) then one token per byte; ids decode as bytes.
type fakeTokenizer struct{}

func (fakeTokenizer) Encode(text string) ([]uint32, error) {
	ids := []uint32{1}
	for i := range len(text) {
		ids = append(ids, uint32(text[i]))
	}
	return ids, nil
}

func (fakeTokenizer) HasChatTemplate() bool { return true }

func (fakeTokenizer) NewDecoder([]uint32, []string) textgen.Decoder { return &byteDecoder{} }

func (fakeTokenizer) TemplateSource() string { return "" }

// byteDecoder decodes ids as bytes, holding back an incomplete character.
type byteDecoder struct{ held []byte }

func (d *byteDecoder) Next(ids []uint32) string {
	for _, id := range ids {
		d.held = append(d.held, byte(id))
	}
	n := len(d.held)
	for n > 0 && !utf8.Valid(d.held[:n]) {
		n--
	}
	out := string(d.held[:n])
	d.held = d.held[n:]
	return out
}

func (d *byteDecoder) Flush() string { out := string(d.held); d.held = nil; return out }

func (fakeTokenizer) ChatTokens(chat textgen.Chat) ([]uint32, string, error) {
	var ids []uint32
	var text strings.Builder
	for _, m := range chat.Messages {
		if m.Role == "bad" {
			return nil, "", errors.New("template raised: unknown role bad")
		}
		ids = append(ids, uint32(len(m.Role)))
		for i := range len(m.Content) {
			ids = append(ids, uint32(m.Content[i]))
		}
		text.WriteString(m.Role + ":" + m.Content + ";")
	}
	return ids, text.String(), nil
}

func (fakeTokenizer) Decode(ids []uint32) (string, error) {
	d := &byteDecoder{}
	return d.Next(ids) + d.Flush(), nil
}

func chat(msgs ...string) *workerv1.GenerateRequest {
	p := &workerv1.Messages{}
	for i := 0; i+1 < len(msgs); i += 2 {
		p.Messages = append(p.Messages, &workerv1.Message{Role: msgs[i], Content: msgs[i+1]})
	}
	return &workerv1.GenerateRequest{RequestId: "c", Prompt: &workerv1.GenerateRequest_Messages{Messages: p}}
}

// Without a chat template a worker refuses messages, saying how to load
// one; an empty conversation or role is refused either way.
func TestMessagesWithoutTokenizer(t *testing.T) {
	t.Parallel()
	s, c := serve(t, &fakeEngine{}, worker, 0)
	s.Admit(true, "")
	for name, tc := range map[string]struct {
		req  *workerv1.GenerateRequest
		want []string
	}{
		"no template":   {chat("user", "hi"), []string{"prompt.messages", "--tokenizer-dir", "--chat-template"}},
		"no messages":   {chat(), []string{"prompt.messages: must not be empty"}},
		"no role":       {chat("", "hi"), []string{"prompt.messages[0].role"}},
		"no role later": {chat("user", "hi", "", "x"), []string{"prompt.messages[1].role"}},
	} {
		r := run(t.Context(), c, tc.req)
		msg := status.Convert(r.err).Message()
		if status.Code(r.err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, r.err)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not name %q", name, msg, w)
			}
		}
	}
}

// With a Tokenizer, messages reach the engine as the rendered token ids,
// for token-only engines too, count against the model's length, and
// generate up to the rest of it by default.
func TestMessagesRendered(t *testing.T) {
	t.Parallel()
	tokenOnly := worker
	tokenOnly.SupportsTextInput = false
	e := &fakeEngine{}
	s, c := serve(t, e, tokenOnly, 0)
	s.Wrap(tokenized(fakeTokenizer{}, 100))
	s.Admit(true, "")

	if r := run(t.Context(), c, chat("system", "A", "user", "hi")); r.err != nil || r.tokens != 2 {
		t.Fatalf("chat request: %+v, want 2 tokens", r)
	}
	e.mu.Lock()
	got, maxTokens := e.prompts[len(e.prompts)-1], e.maxTokens[len(e.maxTokens)-1]
	e.mu.Unlock()
	if diff := cmp.Diff([]uint32{6, 'A', 4, 'h', 'i'}, got); diff != "" {
		t.Errorf("engine prompt (-want +got):\n%s", diff)
	}
	// Without max_tokens, the rest of the model's 100 tokens, less one
	// (SGLang's limit).
	if maxTokens != 94 {
		t.Errorf("engine max_tokens = %d, want 94: the model's 100 less the prompt's 5 and one", maxTokens)
	}
	req := chat("user", "hi")
	req.Stopping = &workerv1.Stopping{MaxTokens: 7}
	if r := run(t.Context(), c, req); r.err != nil {
		t.Fatal(r.err)
	}
	e.mu.Lock()
	maxTokens = e.maxTokens[len(e.maxTokens)-1]
	e.mu.Unlock()
	if maxTokens != 7 {
		t.Errorf("engine max_tokens = %d, want the request's 7", maxTokens)
	}

	r := run(t.Context(), c, chat("bad", "x"))
	if status.Code(r.err) != codes.InvalidArgument || !strings.Contains(r.err.Error(), "prompt.messages: rendering the chat template: template raised") {
		t.Errorf("template error: %v, want InvalidArgument naming prompt.messages with the template's words", r.err)
	}

	// 99 tokens of content plus one for the role: 100, the model's length.
	r = run(t.Context(), c, chat("user", strings.Repeat("x", 99)))
	if status.Code(r.err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(r.err).Message(), "prompt.messages: 100 tokens") {
		t.Errorf("long chat: %v, want InvalidArgument naming prompt.messages and its 100 tokens", r.err)
	}
}

// A request over the model's length carries an ErrorInfo with the numbers,
// which vigil route turns into OpenAI's words.
func TestContextLengthErrorInfo(t *testing.T) {
	t.Parallel()
	s, c := serve(t, &fakeEngine{}, worker, 0)
	s.Admit(true, "")
	long := prompt(make([]uint32, 60)...)
	long.Stopping = &workerv1.Stopping{MaxTokens: 50}
	for name, tc := range map[string]struct {
		req   *workerv1.GenerateRequest
		field string
		meta  map[string]string
	}{
		"max tokens": {long, "stopping.max_tokens", map[string]string{"max_model_len": "100", "prompt_tokens": "60", "max_tokens": "50"}},
		"prompt":     {prompt(make([]uint32, 100)...), "prompt.token_ids", map[string]string{"max_model_len": "100", "prompt_tokens": "100", "max_tokens": "0"}},
		// A text prompt's length is unknown here: no numbers, which would be false.
		"text": {&workerv1.GenerateRequest{Prompt: &workerv1.GenerateRequest_Text{Text: "hi"}, Stopping: &workerv1.Stopping{MaxTokens: 101}}, "stopping.max_tokens", nil},
	} {
		r := run(t.Context(), c, tc.req)
		st := status.Convert(r.err)
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.field+":") {
			t.Errorf("%s: %v, want InvalidArgument naming %s first", name, r.err, tc.field)
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if tc.meta == nil {
			if info != nil {
				t.Errorf("%s: ErrorInfo %v, want none", name, info)
			}
			continue
		}
		if info.GetReason() != workerapi.ReasonContextLength || info.GetDomain() != workerapi.ErrorDomain {
			t.Fatalf("%s: details %v, want an ErrorInfo %s in %s", name, st.Details(), workerapi.ReasonContextLength, workerapi.ErrorDomain)
		}
		if diff := cmp.Diff(tc.meta, info.GetMetadata()); diff != "" {
			t.Errorf("%s: ErrorInfo metadata (-want +got):\n%s", name, diff)
		}
	}
}
