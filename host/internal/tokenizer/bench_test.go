package tokenizer

import (
	"strings"
	"testing"
)

// benchText is about 1,000 tokens of mixed text: every reference text,
// repeated.
func benchText(ref *reference) string {
	var b strings.Builder
	for b.Len() < 4000 {
		for _, c := range ref.Texts {
			if !c.AddSpecialTokens && c.Name != "special tokens" {
				b.WriteString(c.Text)
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// BenchmarkEncode reports ns/op for one ~4 KB prompt and tokens/s.
func BenchmarkEncode(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok, ref := family(b, fam)
			text := benchText(ref)
			ids, err := tok.Encode(text, false)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tok.Encode(text, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkDecoderNext streams the same text back one token per Next, as
// a worker does with an engine's output: ns/token.
func BenchmarkDecoderNext(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok, ref := family(b, fam)
			ids, err := tok.Encode(benchText(ref), false)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				d := tok.NewDecoder(true, nil)
				for i := range ids {
					d.Next(ids[i : i+1])
				}
				d.Flush()
				n += len(ids)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRenderChat renders a four-turn conversation.
func BenchmarkRenderChat(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok, ref := family(b, fam)
			msgs := ref.Chats[2].Messages // system user assistant user
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tok.RenderChat(msgs, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad reads a model directory (tokenizer.json is 9-33 MB).
func BenchmarkLoad(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			family(b, fam)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load("testdata/models/"+fam, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeLongRun encodes 100 KB that pre-tokenizes into one piece
// (a run of spaces, as a prompt may be): the merge is O(n log n), where
// the library's took minutes.
func BenchmarkEncodeLongRun(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok, _ := family(b, fam)
			text := strings.Repeat(" ", 50000) + strings.Repeat("a", 50000)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := tok.Encode(text, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
