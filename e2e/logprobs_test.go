package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/sdk/enginemock"
)

// referencePieces is each id's text as the model's tokenizer.json gives
// it, read without vigil's tokenizer: a byte-level BPE vocabulary entry
// mapped back through GPT-2's byte table (Llama 3's), the bytes of the
// token; added tokens are their content.
func referencePieces(t *testing.T, dir string) map[uint32][]byte {
	t.Helper()
	var tj struct {
		Model struct {
			Vocab map[string]uint32 `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      uint32 `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err == nil {
		err = json.Unmarshal(b, &tj)
	}
	if err != nil {
		t.Fatal(err)
	}
	// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
	// others for 256, 257... in order.
	byteOf := map[rune]byte{}
	n := 0
	for c := range 256 {
		if c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF {
			byteOf[rune(c)] = byte(c)
			continue
		}
		byteOf[rune(256+n)] = byte(c)
		n++
	}
	out := make(map[uint32][]byte, len(tj.Model.Vocab))
	for piece, id := range tj.Model.Vocab {
		var raw []byte
		for _, r := range piece {
			raw = append(raw, byteOf[r])
		}
		out[id] = raw
	}
	for _, a := range tj.Added {
		out[a.ID] = []byte(a.Content)
	}
	return out
}

// appLogprob is one position as the openai package gives it (chat).
type appLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
	Top     []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// TestLogprobs: chat's logprobs and top_logprobs, streamed and not, and
// completions' logprobs, streamed and not and with echo (lm-eval-harness's
// loglikelihood request: echo, logprobs 1, max_tokens 0), through vigil
// route to each engine's worker with Llama 3's tokenizer, with the pinned
// openai package (each got 400 before): every token's text and bytes are
// the reference tokenizer's, and every logprob is the mock's
// (enginemock.PositionLogprobs), the alternatives the likeliest in order;
// TensorRT-LLM's chosen token outside its top-k shows as -9999.0 (chat)
// and null (completions).
func TestLogprobs(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipVariant(t, e)
		testLogprobs(t, e)
	})
}

func testLogprobs(t *testing.T, e *engine) {
	dir, ref := fixtureTokenizer(t, "llama3")
	pieces := referencePieces(t, dir)
	out, text := ref.text(t, "plain")
	c := consulFor(t)
	svc := uniqueService(t)
	m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(time.Millisecond)})
	v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc, extra: []string{"--tokenizer-dir", dir}})
	v.waitLine("worker registered", 120*time.Second)
	base := "http://" + startRouter(t, c, svc, 1).HTTP
	m.post(t, "/script", map[string]any{"tokens": out, "eos": true})
	lp := expected{unknownOutside: e.Name == harness.TRTLLM.Name}

	t.Run("chat", func(t *testing.T) {
		var got struct{ Whole, Streamed chatLogprobs }
		runApp(t, base, e.servedModel, "openai-chat-logprobs", &got)
		for name, g := range map[string]chatLogprobs{"whole": got.Whole, "streamed": got.Streamed} {
			if g.Content != text {
				t.Errorf("%s: content %q, want %q", name, g.Content, text)
			}
			lp.checkChat(t, name, g.Logprobs, out, pieces, []byte(text))
		}
	})
	t.Run("completions", func(t *testing.T) { lp.testCompletions(t, base, e.servedModel, out, pieces) })
	t.Run("characters across tokens", func(t *testing.T) {
		out, text := ref.text(t, "emoji")
		m.post(t, "/script", map[string]any{"tokens": out, "eos": true})
		var got struct{ Whole chatLogprobs }
		runApp(t, base, e.servedModel, "openai-chat-logprobs", &got)
		lp.checkChat(t, "emoji", got.Whole.Logprobs, out, pieces, []byte(text))
	})
}

// chatLogprobs is a chat choice's content and logprobs.
type chatLogprobs struct {
	Content  string
	Logprobs []appLogprob
}

// expected is what an engine's logprobs are: the mock's, unknown where
// TensorRT-LLM's top-k (at least 1) lacks the chosen token.
type expected struct{ unknownOutside bool }

// chosen is the chosen token id's logprob with k alternatives; nil when
// unknown.
func (x expected) chosen(id uint32, k int) *float64 {
	d := enginemock.PositionLogprobs(id, k)
	if x.unknownOutside && d.Chosen.Rank > uint32(max(k, 1)) {
		return nil
	}
	return new(float64(d.Chosen.Logprob))
}

// chatValue is a logprob as chat shows it: -9999.0 when unknown.
func chatValue(lp *float64) float64 {
	if lp == nil {
		return -9999
	}
	return *lp
}

// checkChat checks chat's logprobs of the output ids out, whose text's
// bytes are text.
func (x expected) checkChat(t *testing.T, name string, lps []appLogprob, out []uint32, pieces map[uint32][]byte, text []byte) {
	t.Helper()
	if len(lps) != len(out) {
		t.Fatalf("%s: %d positions, want %d (one per token)", name, len(lps), len(out))
	}
	var all []byte
	var joined strings.Builder
	for i, lp := range lps {
		id := out[i]
		d := enginemock.PositionLogprobs(id, 2)
		var raw []byte
		for _, b := range lp.Bytes {
			raw = append(raw, byte(b))
		}
		all = append(all, raw...)
		joined.WriteString(lp.Token)
		// A token that is part of a character shows as vLLM shows it:
		// "" then the whole character on the token that completes it.
		text := utf8.Valid(pieces[id]) && lp.Token != string(pieces[id])
		if want := chatValue(x.chosen(id, 2)); text || string(raw) != string(pieces[id]) || lp.Logprob != want {
			t.Errorf("%s: position %d: %q %q %v, want the reference's %q and %v", name, i, lp.Token, raw, lp.Logprob, pieces[id], want)
		}
		if len(lp.Top) != 2 {
			t.Errorf("%s: position %d: %d top_logprobs, want 2", name, i, len(lp.Top))
			continue
		}
		for j, top := range lp.Top {
			want := d.Top[j]
			if top.Logprob != float64(want.Logprob) || utf8.Valid(pieces[want.TokenID]) && top.Token != string(pieces[want.TokenID]) {
				t.Errorf("%s: position %d top %d: %q %v, want %q %v", name, i, j, top.Token, top.Logprob, pieces[want.TokenID], want.Logprob)
			}
		}
	}
	if string(all) != string(text) || joined.String() != string(text) {
		t.Errorf("%s: the tokens' bytes make %q, their text %q; want the content %q", name, all, joined.String(), text)
	}
}

// completionLP is completions' logprobs as the openai package gives them.
type completionLP struct {
	Text          string
	Tokens        []string
	TokenLogprobs []*float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]*float64 `json:"top_logprobs"`
	TextOffset    []int                 `json:"text_offset"`
}

func (x expected) testCompletions(t *testing.T, base, model string, out []uint32, pieces map[uint32][]byte) {
	var got struct{ Whole, Streamed, Echo completionLP }
	runApp(t, base, model, "openai-completion-logprobs", &got)
	out = out[:min(len(out), 16)] // completions' default max_tokens
	for name, g := range map[string]completionLP{"whole": got.Whole, "streamed": got.Streamed} {
		if len(g.Tokens) != len(out) || len(g.TokenLogprobs) != len(out) || len(g.TopLogprobs) != len(out) || len(g.TextOffset) != len(out) {
			t.Fatalf("%s: %+v, want %d positions", name, g, len(out))
		}
		offset := 0
		for i, id := range out {
			d := enginemock.PositionLogprobs(id, 2)
			lp, want := g.TokenLogprobs[i], x.chosen(id, 2)
			if g.Tokens[i] != string(pieces[id]) || (lp == nil) != (want == nil) || lp != nil && *lp != *want || g.TextOffset[i] != offset {
				t.Errorf("%s: position %d: %q %v at %d, want the reference's %q, %v at %d", name, i, g.Tokens[i], lp, g.TextOffset[i], pieces[id], want, offset)
			}
			top := g.TopLogprobs[i]
			if _, ok := top[g.Tokens[i]]; !ok || slices.Max(mapValues(top)) != float64(d.Top[0].Logprob) || len(top) > 3 {
				t.Errorf("%s: position %d: top_logprobs %v, want the chosen token's and the 2 likeliest", name, i, top)
			}
			offset += utf8.RuneCountInString(g.Tokens[i])
		}
		if strings.Join(g.Tokens, "") != g.Text {
			t.Errorf("%s: tokens %q do not make the text %q", name, g.Tokens, g.Text)
		}
	}
	// "Hello world" is Llama 3's 9906, 1917: the prompt alone, its first
	// position without a logprob.
	e := got.Echo
	second := x.chosen(1917, 1)
	if e.Text != "Hello world" || !slices.Equal(e.Tokens, []string{"Hello", " world"}) || len(e.TokenLogprobs) != 2 ||
		e.TokenLogprobs[0] != nil || (e.TokenLogprobs[1] == nil) != (second == nil) || second != nil && *e.TokenLogprobs[1] != *second ||
		e.TopLogprobs[0] != nil || !slices.Equal(e.TextOffset, []int{0, 5}) {
		t.Errorf("echo, logprobs 1, max_tokens 0: %+v; want the prompt's two positions, the first null, the second %v", e, second)
	}
}

func mapValues(m map[string]*float64) []float64 {
	var out []float64
	for _, v := range m {
		if v != nil {
			out = append(out, *v)
		}
	}
	if out == nil {
		out = []float64{0}
	}
	return out
}
