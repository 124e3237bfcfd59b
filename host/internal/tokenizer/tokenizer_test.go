package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestEncodeMatchesReference(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, ref := family(t, fam)
			for _, c := range ref.Texts {
				got, err := tok.Encode(c.Text, c.AddSpecialTokens)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				if !slices.Equal(got, c.IDs) {
					t.Errorf("Encode(%q, special=%v) [%s]\n got %v\nwant %v", c.Text, c.AddSpecialTokens, c.Name, got, c.IDs)
				}
			}
		})
	}
}

func TestDecodeMatchesReference(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, ref := family(t, fam)
			for _, c := range ref.Texts {
				got, err := tok.Decode(c.IDs, false)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				if got != c.Decoded {
					t.Errorf("Decode [%s, special=%v] = %q, want %q", c.Name, c.AddSpecialTokens, got, c.Decoded)
				}
				// Skipping special tokens leaves the text (but for
				// special tokens written in it, and Qwen's NFC).
				if c.Name == "special tokens" {
					continue
				}
				plain, err := tok.Decode(c.IDs, true)
				if err != nil {
					t.Fatal(err)
				}
				if !c.AddSpecialTokens && plain != c.Decoded {
					t.Errorf("Decode(skip special) [%s] = %q, want %q", c.Name, plain, c.Decoded)
				}
			}
		})
	}
}

func TestRenderChatMatchesReference(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, ref := family(t, fam)
			if !tok.HasChatTemplate() {
				t.Fatal("HasChatTemplate() = false for a config with chat_template")
			}
			for _, c := range ref.Chats {
				name := fmt.Sprintf("%s (add_generation_prompt=%v)", c.Name, c.AddGenerationPrompt)
				kwargs, err := ParseKwargs(string(c.Kwargs))
				if err != nil {
					t.Fatalf("%s: kwargs: %v", name, err)
				}
				got, err := tok.RenderChatWith(c.Messages, ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: string(c.Tools), Kwargs: kwargs})
				if c.Error != nil {
					if err == nil || !strings.Contains(err.Error(), *c.Error) {
						t.Errorf("%s: err = %v, want the template's raise_exception %q", name, err, *c.Error)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got != *c.Rendering {
					t.Errorf("%s:\n got %q\nwant %q", name, got, *c.Rendering)
				}
				ids, err := tok.Encode(got, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, c.IDs) {
					t.Errorf("%s: Encode(rendering)\n got %v\nwant %v", name, ids, c.IDs)
				}
			}
		})
	}
}

// streams are the reference id sequences a Decoder is fed: every text
// and every rendered chat.
func streams(ref *reference) map[string][]uint32 {
	s := map[string][]uint32{}
	for _, c := range ref.Texts {
		s[fmt.Sprintf("text %s special=%v", c.Name, c.AddSpecialTokens)] = c.IDs
	}
	for _, c := range ref.Chats {
		if c.Rendering != nil {
			s[fmt.Sprintf("chat %s gen=%v", c.Name, c.AddGenerationPrompt)] = c.IDs
		}
	}
	return s
}

// TestDecoderStreamsWholeCharacters feeds every reference sequence to a
// Decoder one id at a time, all at once and in random pieces: the pieces
// add up to Decode's text and none ends in half a character.
func TestDecoderStreamsWholeCharacters(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, ref := family(t, fam)
			rng := rand.New(rand.NewPCG(1, 2))
			splitChars := 0 // tokens that hold part of a character
			for name, ids := range streams(ref) {
				for _, id := range ids {
					if s, _ := tok.Decode([]uint32{id}, false); !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
						splitChars++
					}
				}
				for _, skip := range []bool{false, true} {
					want, err := tok.Decode(ids, skip)
					if err != nil {
						t.Fatal(err)
					}
					splits := [][]int{ones(len(ids)), {len(ids)}}
					for range 20 {
						splits = append(splits, randomSplit(rng, len(ids)))
					}
					for _, sizes := range splits {
						d := tok.NewDecoder(skip, nil)
						var got strings.Builder
						rest := ids
						for _, n := range sizes {
							piece := d.Next(rest[:n])
							rest = rest[n:]
							if !utf8.ValidString(piece) || strings.ContainsRune(piece, utf8.RuneError) {
								t.Fatalf("%s: Next returned %q: half a character", name, piece)
							}
							got.WriteString(piece)
						}
						got.WriteString(d.Flush())
						if got.String() != want {
							t.Fatalf("%s (skip=%v, pieces %v): streamed %q, want %q", name, skip, sizes, got.String(), want)
						}
					}
				}
			}
			if splitChars == 0 {
				t.Fatal("no reference token holds part of a character: the test would not see a split one")
			}
			t.Logf("%d tokens hold part of a character", splitChars)
		})
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func randomSplit(rng *rand.Rand, n int) []int {
	var s []int
	for n > 0 {
		k := 1 + rng.IntN(min(n, 4))
		s = append(s, k)
		n -= k
	}
	return s
}

// A character whose bytes come in separate tokens is emitted once whole,
// after its last byte, and Flush gives U+FFFD for a stream cut inside one.
func TestDecoderHoldsSplitCharacter(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, _ := family(t, fam)
			// The first of these whose first character the tokenizer
			// splits across tokens.
			var text, char string
			var ids []uint32
			for _, c := range []string{"🦙", "𠜎", "ꙮ", "🫠"} {
				var err error
				if ids, err = tok.Encode(c+"!", false); err != nil {
					t.Fatal(err)
				}
				if s, _ := tok.Decode(ids[:1], false); strings.ContainsRune(s, utf8.RuneError) {
					text, char = c+"!", c
					break
				}
			}
			if text == "" {
				t.Fatal("no candidate character is split across tokens")
			}
			d := tok.NewDecoder(true, nil)
			var pieces []string
			for _, id := range ids {
				pieces = append(pieces, d.Next([]uint32{id}))
			}
			pieces = append(pieces, d.Flush())
			if strings.Join(pieces, "") != text {
				t.Fatalf("pieces %q do not add up to %q", pieces, text)
			}
			if !slices.Contains(pieces, char) && !slices.Contains(pieces, text) {
				t.Fatalf("pieces %q: %q did not come out whole", pieces, char)
			}
			// The character's first token alone, then the end of the stream.
			d = tok.NewDecoder(true, nil)
			if got := d.Next(ids[:1]); got != "" {
				t.Fatalf("Next(%q's first token) = %q, want nothing yet", char, got)
			}
			if got := d.Flush(); !utf8.ValidString(got) || !strings.ContainsRune(got, utf8.RuneError) {
				t.Fatalf("Flush after a cut character = %q, want U+FFFD (valid UTF-8)", got)
			}
		})
	}
}

func TestEncodeConcurrent(t *testing.T) {
	tok, ref := family(t, "llama3")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i, c := range ref.Texts {
				if (i+g)%2 == 0 {
					continue
				}
				got, err := tok.Encode(c.Text, c.AddSpecialTokens)
				if err != nil || !slices.Equal(got, c.IDs) {
					t.Errorf("concurrent Encode(%q) = %v, %v", c.Text, got, err)
				}
			}
		})
	}
	wg.Wait()
}

func TestEOSTokenIDs(t *testing.T) {
	want := map[string]string{"llama3": "<|end_of_text|>", "qwen3": "<|im_end|>", "gemma3": "<end_of_turn>"}
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, _ := family(t, fam)
			id, ok := tok.TokenID(want[fam])
			if !ok {
				t.Fatalf("TokenID(%q) not found", want[fam])
			}
			if got := tok.EOSTokenIDs(); !slices.Equal(got, []uint32{id}) {
				t.Fatalf("EOSTokenIDs() = %v, want [%d] (%s)", got, id, want[fam])
			}
		})
	}
}

// A stream of bytes that never make a character (a broken generation) is
// not held back for ever: it comes out as U+FFFD, as Decode gives it.
func TestDecoderDoesNotHoldInvalidBytesForEver(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, _ := family(t, fam)
			// A token of one continuation byte (0x80): Gemma's <0x80>,
			// the byte-level alphabet's character for 0x80 elsewhere.
			id, ok := tok.TokenID("<0x80>")
			if !ok {
				id, ok = tok.TokenID(pretokenizerBytesChar(0x80))
			}
			if !ok {
				t.Fatal("no token for the byte 0x80")
			}
			ids := make([]uint32, 40)
			for i := range ids {
				ids[i] = id
			}
			want, err := tok.Decode(ids, false)
			if err != nil {
				t.Fatal(err)
			}
			d := tok.NewDecoder(false, nil)
			var got strings.Builder
			emitted := false
			for i := range ids {
				piece := d.Next(ids[i : i+1])
				if piece != "" {
					emitted = true
				}
				if !utf8.ValidString(piece) {
					t.Fatalf("Next returned %q, not UTF-8", piece)
				}
				got.WriteString(piece)
			}
			if !emitted {
				t.Fatal("40 invalid bytes were all held back until Flush")
			}
			got.WriteString(d.Flush())
			if got.String() != want {
				t.Fatalf("streamed %q, want %q", got.String(), want)
			}
		})
	}
}

// A SentencePiece-style decoder ends in Strip, which drops the first
// token's space: seeded with the prompt's ids, the output is decoded in
// their context, so "The capital of France is" continues as " Paris", and
// streamed text equals Decode(prompt+output) less Decode(prompt) (issue
// 24, item 3). Gemma 3's vocabulary with Llama 2's decoder.
func TestDecoderSeededWithPromptKeepsSpace(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(familyDir(t, "gemma3"), TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	// The decoder's last member, as the file writes it, gains a Strip
	// (a byte edit: re-encoding the 33 MB file takes seconds).
	fuse := "{\n        \"type\": \"Fuse\"\n      }\n    ]"
	if !strings.Contains(string(src), fuse) {
		t.Fatalf("gemma3's %s: no decoder ending in %q", TokenizerFile, fuse)
	}
	data := strings.Replace(string(src), fuse, `{"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]`, 1)
	sp, err := Load(modelDir(t, map[string]string{TokenizerFile: data}), "")
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := sp.Encode("The capital of France is", true)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := sp.Encode("The capital of France is Paris, a city", true)
	if err != nil || !slices.Equal(whole[:len(prompt)], prompt) {
		t.Fatalf("Encode = %v, %v; want the prompt's ids %v first", whole, err, prompt)
	}
	out := whole[len(prompt):]
	all, _ := sp.Decode(whole, true)
	head, _ := sp.Decode(prompt, true)
	want := strings.TrimPrefix(all, head)
	if want != " Paris, a city" {
		t.Fatalf("reference %q, want %q", want, " Paris, a city")
	}
	d := sp.NewDecoder(true, prompt)
	var got strings.Builder
	for _, id := range out {
		got.WriteString(d.Next([]uint32{id}))
	}
	got.WriteString(d.Flush())
	if got.String() != want {
		t.Errorf("streamed %q, want %q", got.String(), want)
	}
	if unseeded := sp.NewDecoder(true, nil).Next(out[:1]); strings.HasPrefix(unseeded, " ") {
		t.Errorf("unseeded first token %q keeps its space: the test no longer shows the seeding", unseeded)
	}
}

// TokenBytes is each token's own bytes and text, as a logprob shows it:
// for every family the bytes of a text's tokens make its decoding (a
// character cut across byte tokens included: each has its part, its text
// U+FFFD), and a SentencePiece token keeps its leading space, which
// decoding it alone strips.
func TestTokenBytes(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok, ref := family(t, fam)
			for _, c := range ref.Texts {
				if c.AddSpecialTokens || strings.Contains(c.Name, "special") {
					continue
				}
				var all []byte
				for _, id := range c.IDs {
					raw, text, ok := tok.TokenBytes(id)
					if !ok || !utf8.ValidString(text) || utf8.Valid(raw) && text != string(raw) {
						t.Fatalf("%s: TokenBytes(%d) = %q, %q, %v", c.Name, id, raw, text, ok)
					}
					all = append(all, raw...)
				}
				// The reference's decoding: the text as normalized (Qwen 3's NFC).
				if string(all) != c.Decoded {
					t.Errorf("%s: bytes %q, want the text %q", c.Name, all, c.Decoded)
				}
			}
		})
	}
	tok, _ := family(t, "gemma3")
	ids, err := tok.Encode("Hello world", false)
	if err != nil {
		t.Fatal(err)
	}
	if raw, text, _ := tok.TokenBytes(ids[len(ids)-1]); string(raw) != " world" || text != " world" {
		t.Errorf("gemma3's last token of %q: %q %q, want \" world\" with its space", "Hello world", raw, text)
	}
	if _, _, ok := tok.TokenBytes(1 << 30); ok {
		t.Error("an id outside the vocabulary: ok")
	}
}
