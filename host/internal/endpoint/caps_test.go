package endpoint

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"github.com/vigilhq/vigil/host/internal/tokenizer"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
)

// What a worker publishes, per engine, with and without vigil's
// tokenizer: the engine's part that vigil passes on, stop strings only
// where the engine or vigil matches them, choice and json_object where
// vigil can stand them in, the prompt's ids and chat_template_kwargs with
// a tokenizer and template, and n fanned out.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	const fanned = "n=128"
	for _, c := range []struct {
		name      string
		w         sdk.Worker
		tokenizer bool
		want      string
	}{
		{"legacy adapter", worker, false, "ignore_eos,min_p,min_tokens," + fanned + ",seed,stop,top_k"},
		{"vllm", accepting(vllmAccepts...), false, "choice,frequency_penalty,grammar.ebnf,grammar.lark,ignore_eos,json_object,json_schema,logit_bias,min_p,min_tokens," +
			fanned + ",presence_penalty,regex,repetition_penalty,seed,stop,structural_tag,top_k"},
		{"vllm tokenizer", accepting(vllmAccepts...), true, "chat_template_kwargs,choice,frequency_penalty,grammar.ebnf,grammar.lark,ignore_eos,json_object,json_schema,logit_bias,min_p,min_tokens," +
			fanned + ",presence_penalty,prompt_token_ids,regex,repetition_penalty,resume,seed,stop,structural_tag,top_k"},
		{"sglang", accepting(sglangAccepts...), false, "choice,frequency_penalty,grammar.ebnf,ignore_eos,json_object,json_schema,min_p,min_tokens," +
			fanned + ",presence_penalty,regex,repetition_penalty,structural_tag,top_k"},
		{"sglang tokenizer", accepting(sglangAccepts...), true, "chat_template_kwargs,choice,frequency_penalty,grammar.ebnf,ignore_eos,json_object,json_schema,min_p,min_tokens," +
			fanned + ",presence_penalty,prompt_token_ids,regex,repetition_penalty,resume,stop,structural_tag,top_k"},
		{"trtllm", accepting(trtllmAccepts...), false, "choice,frequency_penalty,grammar.ebnf,ignore_eos,json_object,json_schema,logit_bias,min_tokens," +
			fanned + ",presence_penalty,regex,repetition_penalty,seed,stop,top_k"},
		{"nothing", accepting(), false, fanned},
	} {
		s, _ := serve(t, &fakeEngine{}, c.w, 0)
		if c.tokenizer {
			s.Wrap(tokenized(fakeTokenizer{}, 100))
		}
		if got := s.Capabilities().String(); got != c.want {
			t.Errorf("%s: capabilities\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	s, _ := serve(t, nil, worker, 1)
	if s.Capabilities().Stated() {
		t.Errorf("before Attach: %q, want none stated", s.Capabilities())
	}
	s.Attach(&fakeEngine{}, worker)
	if got := s.Capabilities().String(); strings.Contains(got, "n=") {
		t.Errorf("--max-inflight 1: %q, want no n", got)
	}
}

// With a tokenizer, return_prompt sends the prompt first: its token ids
// as the engine gets them and its text (as given, rendered or decoded);
// with one, a tokenizer-less SGLang worker takes stop strings too.
func TestReturnPrompt(t *testing.T) {
	t.Parallel()
	s, c := serve(t, &fakeEngine{}, accepting(sglangAccepts...), 0)
	s.Wrap(tokenized(fakeTokenizer{}, 100))
	s.Admit(true, "")
	for _, tc := range []struct {
		req  *workerv1.GenerateRequest
		want *workerv1.Prompt
	}{
		{text("hi"), &workerv1.Prompt{TokenIds: []uint32{1, 'h', 'i'}, Text: "hi"}},
		{prompt('o', 'k'), &workerv1.Prompt{TokenIds: []uint32{'o', 'k'}, Text: "ok"}},
		{chat("user", "hi"), &workerv1.Prompt{TokenIds: []uint32{4, 'h', 'i'}, Text: "user:hi;"}},
	} {
		tc.req.ReturnPrompt = true
		tc.req.Stopping = &workerv1.Stopping{Stop: []string{"zz"}}
		msgs, err := all(t.Context(), c, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, msgs[0].GetPrompt(), protocmp.Transform()); diff != "" {
			t.Errorf("first message (-want +got):\n%s", diff)
		}
	}
	if msgs, err := all(t.Context(), c, text("hi")); err != nil || msgs[0].GetPrompt() != nil {
		t.Errorf("without return_prompt: first message %v, %v; want a chunk", msgs, err)
	}
}

// The faults of issue 25's "Why", through the worker with the real Qwen3
// template: a developer message reaches the model (as system), a name
// reaches the template, chat_template_kwargs turn thinking off, and a
// kwarg that would override a variable the worker sets is refused naming
// it.
func TestChatAsClientsSend(t *testing.T) {
	t.Parallel()
	tok, err := tokenizer.Load(filepath.Join("..", "tokenizer", "testdata", "models", "qwen3"), "")
	if err != nil {
		t.Skipf("qwen3 test model: %v", err)
	}
	s, c := serve(t, &fakeEngine{}, worker, 0)
	s.Wrap(tokenized(textgen.HF(tok), 4096))
	s.Admit(true, "")
	render := func(req *workerv1.GenerateRequest) (string, error) {
		req.ReturnPrompt = true
		msgs, err := all(t.Context(), c, req)
		if err != nil {
			return "", err
		}
		return msgs[0].GetPrompt().GetText(), nil
	}
	got, err := render(chat("developer", "Be brief.", "user", "hi"))
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
		t.Errorf("developer: %q, %v; want %q", got, err, want)
	}
	req := chat("user", "hi")
	req.GetMessages().ChatTemplateKwargs = `{"enable_thinking": false}`
	got, err = render(req)
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; err != nil || got != want {
		t.Errorf("enable_thinking false: %q, %v; want %q", got, err, want)
	}
	req = chat("user", "hi")
	req.GetMessages().GetMessages()[0].Name = "bob"
	if _, err := render(req); err != nil {
		t.Errorf("a message with a name: %v, want it taken", err)
	}
	for kw, want := range map[string]string{
		`{"add_generation_prompt": false}`: "prompt.messages.chat_template_kwargs.add_generation_prompt: the worker sets this template variable itself",
		`{"eos_token": "x"}`:               "prompt.messages.chat_template_kwargs.eos_token: the worker sets this template variable itself",
		`[true]`:                           "prompt.messages.chat_template_kwargs: want a JSON object",
	} {
		req := chat("user", "hi")
		req.GetMessages().ChatTemplateKwargs = kw
		if _, err := render(req); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), want) {
			t.Errorf("kwargs %s: %v, want InvalidArgument beginning %q", kw, err, want)
		}
	}
}
