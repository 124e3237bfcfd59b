package endpoint

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/textgen"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Over gRPC, a worker with the model's tokenizer tokenizes texts and
// chats as it sends them to the engine, and detokenizes them back; it
// publishes the tokenize capability; a request for another model is
// NOT_FOUND.
func TestTokenizeRPC(t *testing.T) {
	t.Parallel()
	tok, _ := llama3(t)
	s, c := serve(t, &fakeEngine{}, sdk.Worker{ServedModelName: "m", MaxModelLen: 4096}, 0)
	s.Wrap(tokenized(textgen.HF(tok), 4096))
	if _, ok := s.Capabilities().Lookup(discovery.CapTokenize); !ok {
		t.Errorf("capabilities %q, want tokenize", s.Capabilities())
	}
	want, err := tok.Encode("Hello world", true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Model: "m", Input: &workerv1.TokenizeRequest_Text{Text: "Hello world"}, ReturnTokenStrs: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, r.GetTokenIds()); diff != "" || r.GetMaxModelLen() != 4096 || len(r.GetTokenStrs()) != len(want) {
		t.Errorf("tokenize: %v, want ids %v, max_model_len 4096 and a string per id", r, want)
	}
	d, err := c.Detokenize(t.Context(), &workerv1.DetokenizeRequest{TokenIds: r.GetTokenIds()})
	if err != nil || d.GetText() != "Hello world" {
		t.Errorf("detokenize: %q, %v; want the text back", d.GetText(), err)
	}

	msgs := []*workerv1.Message{{Role: "developer", Content: "Be brief."}, {Role: "user", Content: "hi", Name: "ann"}}
	chat, err := c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Messages{Messages: &workerv1.Messages{Messages: msgs}}})
	if err != nil {
		t.Fatal(err)
	}
	pe := s.engine.(Prompts)
	ids, _, _, err := pe.Prompt(sdk.GenerateRequest{}, &workerv1.Messages{Messages: msgs}, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids, chat.GetTokenIds()); diff != "" {
		t.Errorf("chat: ids (-as Generate sends them +tokenized):\n%s", diff)
	}

	_, err = c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Model: "other", Input: &workerv1.TokenizeRequest_Text{Text: "x"}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("another model: %v, want NOT_FOUND", err)
	}
	_, err = c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Messages{Messages: &workerv1.Messages{}}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "messages:") {
		t.Errorf("no messages: %v, want INVALID_ARGUMENT naming messages", err)
	}
}

// A worker without a tokenizer (vigil run without --tokenizer-dir), or
// with one that serves no Tokenize, answers FAILED_PRECONDITION naming
// the flag, and does not publish tokenize.
func TestTokenizeWithoutTokenizer(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(sdk.Generator) sdk.Generator{"none": nil, "no vocabulary": tokenized(fakeTokenizer{}, 100)} {
		s, c := serve(t, &fakeEngine{}, worker, 0)
		s.Wrap(wrap)
		if _, ok := s.Capabilities().Lookup(discovery.CapTokenize); ok {
			t.Errorf("%s: capabilities %q, want no tokenize", name, s.Capabilities())
		}
		_, err := c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Text{Text: "x"}, AddSpecialTokens: proto.Bool(true)})
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "--tokenizer-dir") {
			t.Errorf("%s: tokenize: %v, want FAILED_PRECONDITION naming --tokenizer-dir", name, err)
		}
		_, err = c.Detokenize(t.Context(), &workerv1.DetokenizeRequest{TokenIds: []uint32{1}})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s: detokenize: %v, want FAILED_PRECONDITION", name, err)
		}
	}
}

// Before an engine is attached, Tokenize is UNAVAILABLE with the reason,
// so a router tries another worker.
func TestTokenizeBeforeAttach(t *testing.T) {
	t.Parallel()
	_, c := serve(t, nil, worker, 0)
	_, err := c.Tokenize(t.Context(), &workerv1.TokenizeRequest{Input: &workerv1.TokenizeRequest_Text{Text: "x"}})
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "worker starting" {
		t.Errorf("before Attach: %v, want UNAVAILABLE worker starting", err)
	}
}
