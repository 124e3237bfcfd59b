package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/host/internal/textgen"
	"github.com/vigilhq/vigil/host/internal/tokenizer"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func text(s string) *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{RequestId: "t", Prompt: &workerv1.GenerateRequest_Text{Text: s}}
}

// With a Tokenizer, a text prompt reaches every engine, a token-only one
// too, as its token ids (special tokens added once), never as text; its
// stop strings stay with vigil; max_tokens defaults to the rest of the
// model's context; and a prompt too long gets the true numbers.
func TestTextPromptTokenized(t *testing.T) {
	t.Parallel()
	tokenOnly := worker
	tokenOnly.SupportsTextInput = false
	e := &fakeEngine{}
	s, c := serve(t, e, tokenOnly, 0)
	s.Wrap(tokenized(fakeTokenizer{}, 100))
	s.Admit(true, "")

	req := text("hi")
	req.Stopping = &workerv1.Stopping{Stop: []string{"zz"}}
	if r := run(t.Context(), c, req); r.err != nil || r.tokens != 2 {
		t.Fatalf("text request: %+v, want 2 tokens", r)
	}
	e.mu.Lock()
	ids, txt, stops, maxTokens := e.prompts[0], e.texts[0], e.stops[0], e.maxTokens[0]
	e.mu.Unlock()
	if diff := cmp.Diff([]uint32{1, 'h', 'i'}, ids); diff != "" || txt != "" {
		t.Errorf("engine prompt: text %q, ids (-want +got):\n%s", txt, diff)
	}
	if len(stops) != 0 {
		t.Errorf("engine stop strings %q, want none: vigil matches them", stops)
	}
	if maxTokens != 96 {
		t.Errorf("engine max_tokens = %d, want 96: the model's 100 less the prompt's 3 and one (SGLang's limit)", maxTokens)
	}

	// BOS and 99 bytes: 100 tokens, the model's length.
	r := run(t.Context(), c, text(strings.Repeat("x", 99)))
	st := status.Convert(r.err)
	if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "prompt.text: 100 tokens") {
		t.Fatalf("long text: %v, want InvalidArgument naming prompt.text and its 100 tokens", r.err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	want := map[string]string{"max_model_len": "100", "prompt_tokens": "100", "max_tokens": "0"}
	if diff := cmp.Diff(want, info.GetMetadata()); diff != "" {
		t.Errorf("long text: ErrorInfo metadata (-want +got):\n%s", diff)
	}
}

// Without a Tokenizer, text goes to the engine as text, with its stop
// strings, and the engine's own default max_tokens (as before).
func TestTextPromptWithoutTokenizer(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{}
	s, c := serve(t, e, worker, 0)
	s.Admit(true, "")
	req := text("hi")
	req.Stopping = &workerv1.Stopping{Stop: []string{"zz"}}
	if r := run(t.Context(), c, req); r.err != nil {
		t.Fatal(r.err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.texts[0] != "hi" || e.prompts[0] != nil || e.maxTokens[0] != 0 || !cmp.Equal(e.stops[0], []string{"zz"}) {
		t.Errorf("engine request: text %q ids %v max_tokens %d stop %q, want the text, its stop strings, no max_tokens",
			e.texts[0], e.prompts[0], e.maxTokens[0], e.stops[0])
	}
}

// scriptEngine answers every request with out, one token per chunk, and
// the engine's own text "ENGINE" for each (which vigil must not use once
// it detokenizes). It records the request and whether a send failed.
type scriptEngine struct {
	out      []uint32
	perChunk int // tokens per chunk; 0: 1

	mu       sync.Mutex
	req      sdk.GenerateRequest
	sendErr  error
	sentUpTo int
}

func (f *scriptEngine) Generate(ctx context.Context, req sdk.GenerateRequest, send func(sdk.Chunk) error) (sdk.Result, error) {
	f.mu.Lock()
	f.req = req
	f.mu.Unlock()
	n := max(f.perChunk, 1)
	for i := 0; i < len(f.out); i += n {
		if err := send(sdk.Chunk{TokenIDs: f.out[i:min(i+n, len(f.out))], Text: "ENGINE"}); err != nil {
			f.mu.Lock()
			f.sendErr, f.sentUpTo = err, min(i+n, len(f.out))
			f.mu.Unlock()
			return sdk.Result{}, err
		}
	}
	return sdk.Result{FinishReason: sdk.FinishLength, PromptTokens: uint32(len(req.TokenIDs)), CompletionTokens: uint32(len(f.out))}, nil
}

func (f *scriptEngine) Abort(context.Context, []string) error { return nil }

// llama3 is the Llama 3 fixture model's tokenizer, or a skip without it
// (make tokenizer-models; CI sets VIGIL_REQUIRE_TOKENIZER_MODELS).
func llama3(t *testing.T) (*tokenizer.Tokenizer, string) {
	t.Helper()
	dir := filepath.Join("..", "tokenizer", "testdata", "models", "llama3")
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
	return tok, filepath.Join("..", "tokenizer", "testdata", "llama3.json")
}

// With the real Llama 3 tokenizer: the prompt the engine gets is the
// reference tokenization, and output is vigil's own text, streamed whole
// characters only, however the engine splits them across tokens.
func TestDetokenizedStream(t *testing.T) {
	t.Parallel()
	tok, refPath := llama3(t)
	var ref struct {
		Texts []struct {
			Name             string   `json:"name"`
			Text             string   `json:"text"`
			AddSpecialTokens bool     `json:"add_special_tokens"`
			IDs              []uint32 `json:"ids"`
		} `json:"texts"`
	}
	b, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	var promptText, outText string
	var promptIDs, outIDs []uint32
	for _, x := range ref.Texts {
		switch {
		case x.Name == "multilingual" && x.AddSpecialTokens:
			promptText, promptIDs = x.Text, x.IDs
		case x.Name == "emoji" && !x.AddSpecialTokens:
			outText, outIDs = x.Text, x.IDs
		}
	}
	e := &scriptEngine{out: outIDs}
	tokenOnly := sdk.Worker{ServedModelName: "m", MaxModelLen: 4096}
	s, c := serve(t, e, tokenOnly, 0)
	s.Wrap(tokenized(textgen.HF(tok), 4096))
	s.Admit(true, "")

	r := run(t.Context(), c, text(promptText))
	if r.err != nil {
		t.Fatal(r.err)
	}
	e.mu.Lock()
	got := e.req.TokenIDs
	e.mu.Unlock()
	if diff := cmp.Diff(promptIDs, got); diff != "" {
		t.Errorf("engine prompt ids (-reference +got):\n%s", diff)
	}
	for i, ch := range r.texts {
		if !utf8.ValidString(ch) {
			t.Errorf("chunk %d %q is not whole characters", i, ch)
		}
	}
	if whole := strings.Join(r.texts, ""); whole != outText {
		t.Errorf("streamed text %q, want %q", whole, outText)
	}
	if r.tokens != len(outIDs) || r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("%d token ids, final %v; want %d ids and the engine's length", r.tokens, r.final, len(outIDs))
	}
}

// A stop string that spans two tokens ends the request with finish reason
// stop; neither it nor anything after it is emitted, and the engine's
// stream is ended (the adapter aborts the engine request).
func TestStopStringOnOwnText(t *testing.T) {
	t.Parallel()
	t.Run("a token per chunk", func(t *testing.T) { t.Parallel(); testStopString(t, 1) })
	// Chunks merged on the way hold tokens after the stop, which do not
	// count.
	t.Run("merged chunks", func(t *testing.T) { t.Parallel(); testStopString(t, 4) })
}

func testStopString(t *testing.T, perChunk int) {
	tok, _ := llama3(t)
	out, err := tok.Encode("Hello world! This is the end.", false)
	if err != nil {
		t.Fatal(err)
	}
	e := &scriptEngine{out: out, perChunk: perChunk}
	s, c := serve(t, e, sdk.Worker{ServedModelName: "m", MaxModelLen: 4096}, 0)
	s.Wrap(tokenized(textgen.HF(tok), 4096))
	s.Admit(true, "")

	req := text("Say hello")
	// "lo wor" spans "Hello" and " world".
	req.Stopping = &workerv1.Stopping{Stop: []string{"lo wor"}}
	r := run(t.Context(), c, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := strings.Join(r.texts, ""); got != "Hel" {
		t.Errorf("streamed text %q, want %q: up to the stop string, which is not emitted", got, "Hel")
	}
	if r.final.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_STOP {
		t.Errorf("finish reason %v, want stop", r.final.GetFinishReason())
	}
	if r.final.GetUsage().GetCompletionTokens() != 2 || r.tokens != 2 {
		t.Errorf("usage %v, %d token ids streamed; want 2 (Hello, world)", r.final.GetUsage(), r.tokens)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !errors.Is(e.sendErr, textgen.ErrStopString) || e.sentUpTo != max(2, perChunk) {
		t.Errorf("engine: send failed with %v after %d tokens, want the stop's chunk, which ends its stream", e.sendErr, e.sentUpTo)
	}
	if len(e.req.Stop) != 0 {
		t.Errorf("engine stop strings %q, want none", e.req.Stop)
	}
}
