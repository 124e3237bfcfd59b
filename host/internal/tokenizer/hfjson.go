package tokenizer

// Building a github.com/sugarme/tokenizer pipeline from a Hugging Face
// tokenizer.json. The library reads the file's model, normalizers,
// decoders, post-processors and added tokens; three gaps are filled here,
// each small and tested against @lenml/tokenizers (transformers.js):
//
//   - Split pre-tokenizers whose regex Go's regexp cannot compile (Llama 3
//     and Qwen use the lookahead \s+(?!\S)) run on dlclark/regexp2, which
//     takes the pattern from the file as it is (Oniguruma syntax, as the
//     Rust tokenizers library uses, is close to .NET's that regexp2 speaks).
//   - The ByteLevel pre-tokenizer honours use_regex: false (the library
//     always splits again with GPT-2's pattern, which re-splits Llama 3's
//     pieces such as "!\n").
//   - The BPE merge itself (bpe.go): the library's is quadratic in a
//     pre-token's length and breaks ties between equal ranks in the wrong
//     order; it also lacks byte_fallback (Gemma: a character missing from
//     the vocabulary becomes its UTF-8 bytes' <0xNN> tokens, not <unk>)
//     and ignore_merges (Llama 3: a pre-token that is itself in the
//     vocabulary is one token).
//   - Added tokens, the post-processor's special tokens and the Unicode
//     normalizers are in added.go.
//   - The ByteLevel decoder passes a token with characters outside the
//     byte alphabet through as its own text, as the Rust library does (the
//     Go library turns them into NUL bytes).

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	sm "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model/bpe"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretokenizer"
	"github.com/sugarme/tokenizer/pretrained"
)

// modelExtras are the BPE fields the library ignores.
type modelExtras struct {
	Type         string   `json:"type"`
	UnkToken     *string  `json:"unk_token"`
	ByteFallback bool     `json:"byte_fallback"`
	IgnoreMerges bool     `json:"ignore_merges"`
	FuseUnk      bool     `json:"fuse_unk"`
	Prefix       *string  `json:"continuing_subword_prefix"`
	Suffix       *string  `json:"end_of_word_suffix"`
	Dropout      *float64 `json:"dropout"`
}

// pipeline is what Load builds from tokenizer.json.
type pipeline struct {
	tk             *sm.Tokenizer // model, normalizer, pre-tokenizer, decoder; no added tokens
	added          *addedVocab
	prefix, suffix []uint32 // post_processor's special tokens around a sequence
}

// buildPipeline turns tokenizer.json's bytes into a pipeline.
// The library reports malformed fields by panicking on type assertions;
// that panic comes back as an error naming the section.
func buildPipeline(data []byte) (p *pipeline, err error) {
	var cfg sm.Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	extras, err := readExtras(data)
	if err != nil {
		return nil, err
	}

	section := "model"
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("field %s: malformed or unsupported: %v", section, r)
		}
	}()
	m, err := newBPE(&cfg, extras.Model)
	if err != nil {
		return nil, err
	}
	p = &pipeline{tk: sm.NewTokenizer(m), added: newAddedVocab(extras.AddedTokens)}

	section = "normalizer"
	if cfg.Normalizer != nil {
		n, err := normalizerFor(cfg.Normalizer)
		if err != nil {
			return nil, fmt.Errorf("field normalizer: %w", err)
		}
		p.tk.WithNormalizer(n)
	}
	section = "pre_tokenizer"
	if cfg.PreTokenizer != nil {
		pt, err := preTokenizer(cfg.PreTokenizer)
		if err != nil {
			return nil, fmt.Errorf("field pre_tokenizer: %w", err)
		}
		p.tk.WithPreTokenizer(pt)
	}
	section = "post_processor"
	if p.prefix, p.suffix, err = postProcessor(extras.PostProcessor); err != nil {
		return nil, fmt.Errorf("field post_processor: %w", err)
	}
	section = "decoder"
	if cfg.Decoder != nil {
		d, err := decoder(cfg.Decoder)
		if err != nil {
			return nil, fmt.Errorf("field decoder: %w", err)
		}
		p.tk.WithDecoder(d)
	}
	return p, nil
}

// configExtras are the fields of tokenizer.json that the library's Config
// lacks.
type configExtras struct {
	Model         modelExtras     `json:"model"`
	AddedTokens   []addedToken    `json:"added_tokens"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

// readExtras reads data's extras, refusing a model the pipeline does not
// run.
func readExtras(data []byte) (*configExtras, error) {
	var x configExtras
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, err
	}
	if x.Model.Type != "BPE" {
		return nil, fmt.Errorf("field model.type: %q is not supported (BPE is)", x.Model.Type)
	}
	if d := x.Model.Dropout; d != nil && *d != 0 {
		return nil, fmt.Errorf("field model.dropout: %v is not supported (null or 0 is: dropout is for training)", *d)
	}
	return &x, nil
}

// newBPE builds the model with Hugging Face's options the library does
// not read (x). It may panic on a malformed model, as the library does.
func newBPE(cfg *sm.Config, x modelExtras) (*hfBPE, error) {
	model, err := pretrained.CreateModel(cfg)
	if err != nil {
		return nil, fmt.Errorf("field model: %w", err)
	}
	lib, ok := model.(*bpe.BPE)
	if !ok {
		return nil, fmt.Errorf("field model: the library built a %T, not a BPE", model)
	}
	m := &hfBPE{BPE: lib, byteFallback: x.ByteFallback, ignoreMerges: x.IgnoreMerges, fuseUnk: x.FuseUnk, unk: -1}
	if u := x.UnkToken; u != nil {
		if id, ok := model.TokenToId(*u); ok {
			m.unk = id
		}
	}
	if v := x.Prefix; v != nil {
		m.prefix = *v
	}
	if v := x.Suffix; v != nil {
		m.suffix = *v
	}
	if m.byteFallback {
		for b := range 256 {
			id, ok := model.TokenToId(fmt.Sprintf("<0x%02X>", b))
			if !ok {
				return nil, fmt.Errorf("field model.byte_fallback: true, but the vocabulary has no token <0x%02X>", b)
			}
			m.byteIDs[b] = id
		}
	}
	return m, nil
}

// preTokenizer builds a pre-tokenizer, taking Split and ByteLevel (also
// inside a Sequence) and leaving the others to the library.
func preTokenizer(c map[string]any) (sm.PreTokenizer, error) {
	typ, _ := c["type"].(string)
	switch typ {
	case "Sequence":
		list, ok := c["pretokenizers"].([]any)
		if !ok {
			return nil, fmt.Errorf("a Sequence without a pretokenizers list")
		}
		var seq []sm.PreTokenizer
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("pretokenizers[%d] is not an object", i)
			}
			p, err := preTokenizer(m)
			if err != nil {
				return nil, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			seq = append(seq, p)
		}
		return pretokenizer.NewSequence(seq), nil
	case "Split":
		pat, err := pattern(c["pattern"])
		if err != nil {
			return nil, err
		}
		b, err := behavior(c["behavior"])
		if err != nil {
			return nil, err
		}
		invert, _ := c["invert"].(bool)
		return pretokenizer.NewSplit(pat, b, invert), nil
	case "ByteLevel":
		p := &byteLevelPre{}
		p.addPrefixSpace, _ = c["add_prefix_space"].(bool)
		useRegex, set := c["use_regex"].(bool)
		if useRegex || !set {
			re, err := regexp2.Compile(gpt2Split, regexp2.None)
			if err != nil {
				return nil, err
			}
			p.split = pretokenizer.NewSplit(regexPattern{re}, normalizer.IsolatedBehavior, false)
		}
		return p, nil
	}
	return pretrained.CreatePreTokenizer(c)
}

// gpt2Split is GPT-2's pre-tokenization pattern, which ByteLevel applies
// when use_regex is true (the Rust library's default).
const gpt2Split = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func pattern(v any) (normalizer.Pattern, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a Split without a pattern object")
	}
	if s, ok := m["String"].(string); ok {
		return literalPattern(s), nil
	}
	if s, ok := m["Regex"].(string); ok {
		re, err := regexp2.Compile(s, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("a Split's pattern %q: %w", s, err)
		}
		return regexPattern{re}, nil
	}
	return nil, fmt.Errorf("a Split's pattern %v: String or Regex expected", v)
}

func behavior(v any) (normalizer.SplitDelimiterBehavior, error) {
	s, _ := v.(string)
	switch s {
	case "Removed":
		return normalizer.RemovedBehavior, nil
	case "Isolated":
		return normalizer.IsolatedBehavior, nil
	case "MergedWithNext":
		return normalizer.MergedWithNextBehavior, nil
	case "MergedWithPrevious":
		return normalizer.MergedWithPreviousBehavior, nil
	case "Contiguous":
		return normalizer.ContiguousBehavior, nil
	}
	return 0, fmt.Errorf("a Split's behavior %q: one of Removed, Isolated, MergedWithNext, MergedWithPrevious, Contiguous expected", s)
}

// regexPattern is a normalizer.Pattern over regexp2, whose match positions
// count runes; the library wants byte offsets covering the whole input.
type regexPattern struct{ re *regexp2.Regexp }

func (p regexPattern) FindMatches(inside string) []normalizer.OffsetsMatch {
	if inside == "" {
		return []normalizer.OffsetsMatch{{Offsets: []int{0, 0}, Match: false}}
	}
	// byteAt[i] is the byte offset of rune i; regexp2 reads an invalid
	// byte as one rune, as range does.
	byteAt := make([]int, 0, len(inside)+1)
	for i := range inside {
		byteAt = append(byteAt, i)
	}
	byteAt = append(byteAt, len(inside))

	var out []normalizer.OffsetsMatch
	prev := 0
	m, err := p.re.FindStringMatch(inside)
	for ; m != nil && err == nil; m, err = p.re.FindNextMatch(m) {
		if m.Length == 0 {
			continue
		}
		start, end := byteAt[m.Index], byteAt[m.Index+m.Length]
		if start > prev {
			out = append(out, normalizer.OffsetsMatch{Offsets: []int{prev, start}, Match: false})
		}
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{start, end}, Match: true})
		prev = end
	}
	if prev < len(inside) {
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{prev, len(inside)}, Match: false})
	}
	return out
}

// byteLevelPre maps each byte to GPT-2's printable alphabet, after an
// optional GPT-2 split (use_regex) and prefix space.
type byteLevelPre struct {
	addPrefixSpace bool
	split          *pretokenizer.Split // nil: use_regex false
}

func (b *byteLevelPre) PreTokenize(p *sm.PreTokenizedString) (*sm.PreTokenizedString, error) {
	if b.addPrefixSpace {
		p = p.Split(func(_ int, n *normalizer.NormalizedString) []sm.SplitIdx {
			if !strings.HasPrefix(n.GetNormalized(), " ") {
				n = n.Prepend(" ")
			}
			return []sm.SplitIdx{{Normalized: n}}
		})
	}
	if b.split != nil {
		var err error
		if p, err = b.split.PreTokenize(p); err != nil {
			return nil, err
		}
	}
	return p.Normalize(func(n *normalizer.NormalizedString) *normalizer.NormalizedString {
		s := n.GetNormalized()
		changes := make([]normalizer.ChangeMap, 0, len(s))
		for i := 0; i < len(s); i++ {
			c := 0
			if i > 0 && !utf8.RuneStart(s[i]) {
				c = 1 // a continuation byte adds a character
			}
			changes = append(changes, normalizer.ChangeMap{RuneVal: pretokenizer.BytesChar[s[i]], Changes: c})
		}
		return n.Transform(changes, 0)
	}), nil
}

// decoder builds a decoder, taking ByteLevel, Replace and Sequence and
// leaving the others (ByteFallback, Fuse, Strip...) to the library.
func decoder(c map[string]any) (sm.Decoder, error) {
	switch typ, _ := c["type"].(string); typ {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "Replace":
		return replace(c)
	case "Sequence":
		list, ok := c["decoders"].([]any)
		if !ok {
			return nil, fmt.Errorf("a Sequence without a decoders list")
		}
		var seq decoderSeq
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("decoders[%d] is not an object", i)
			}
			d, err := decoder(m)
			if err != nil {
				return nil, fmt.Errorf("decoders[%d]: %w", i, err)
			}
			seq = append(seq, d)
		}
		return seq, nil
	}
	return pretrained.CreateDecoder(c)
}

type decoderSeq []sm.Decoder

func (s decoderSeq) DecodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.DecodeChain(tokens)
	}
	return tokens
}

func (s decoderSeq) Decode(tokens []string) string {
	return strings.Join(s.DecodeChain(tokens), "")
}

// replace builds a Replace normalizer or decoder. The library's walks
// the whole string for each match (quadratic: minutes for Gemma's 100 KB
// prompt), compiles a String pattern as a regexp on every call, and reads
// Regex as String; a String pattern is replaced here in one pass.
func replace(c map[string]any) (interface {
	normalizer.Normalizer
	sm.Decoder
}, error) {
	pat, err := pattern(c["pattern"])
	if err != nil {
		return nil, err
	}
	content, ok := c["content"].(string)
	if !ok {
		return nil, fmt.Errorf("a Replace without a content string")
	}
	if lit, ok := pat.(literalPattern); ok && lit != "" {
		return literalReplace{pat: string(lit), content: content}, nil
	}
	return &normalizer.Replace{Pattern: pat, Content: content}, nil
}

// literalReplace replaces every occurrence of pat with content.
type literalReplace struct{ pat, content string }

func (r literalReplace) Normalize(n *normalizer.NormalizedString) (*normalizer.NormalizedString, error) {
	s := n.GetNormalized()
	if !strings.Contains(s, r.pat) {
		return n, nil
	}
	// One change per output character: 0 for one that takes an input
	// character's place, 1 for one more, -k on the last one before k
	// input characters that are gone.
	k := utf8.RuneCountInString(r.pat)
	repl := []rune(r.content)
	changes := make([]normalizer.ChangeMap, 0, len(s))
	initial := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], r.pat) {
			for j, c := range repl {
				ch := 0
				if j >= k {
					ch = 1
				}
				changes = append(changes, normalizer.ChangeMap{RuneVal: string(c), Changes: ch})
			}
			if gone := k - len(repl); gone > 0 {
				switch {
				case len(repl) > 0 || len(changes) > 0:
					changes[len(changes)-1].Changes -= gone
				default:
					initial += gone
				}
			}
			i += len(r.pat)
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		changes = append(changes, normalizer.ChangeMap{RuneVal: string(c), Changes: 0})
		i += size
	}
	return n.Transform(changes, initial), nil
}

func (r literalReplace) DecodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = strings.ReplaceAll(t, r.pat, r.content)
	}
	return out
}

func (r literalReplace) Decode(tokens []string) string {
	return strings.Join(r.DecodeChain(tokens), "")
}

// literalPattern matches a string (Split's and Replace's String pattern).
type literalPattern string

func (p literalPattern) FindMatches(inside string) []normalizer.OffsetsMatch {
	if p == "" || inside == "" {
		return []normalizer.OffsetsMatch{{Offsets: []int{0, len(inside)}, Match: false}}
	}
	var out []normalizer.OffsetsMatch
	prev := 0
	for {
		i := strings.Index(inside[prev:], string(p))
		if i < 0 {
			break
		}
		start := prev + i
		if start > prev {
			out = append(out, normalizer.OffsetsMatch{Offsets: []int{prev, start}, Match: false})
		}
		prev = start + len(p)
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{start, prev}, Match: true})
	}
	if prev < len(inside) {
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{prev, len(inside)}, Match: false})
	}
	return out
}

// byteLevelDec maps GPT-2's byte alphabet back to bytes; a token with a
// character outside it (an added token such as "<|im_start|>" is inside
// it; others may not be) is kept as its UTF-8 text.
type byteLevelDec struct{}

// Decode joins the tokens' bytes; each byte that is not part of a UTF-8
// character becomes U+FFFD (as ByteFallback does), so that the text of a
// stream does not depend on where it was cut.
func (d byteLevelDec) Decode(tokens []string) string {
	s := strings.Join(d.DecodeChain(tokens), "")
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				continue
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (byteLevelDec) DecodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		buf := make([]byte, 0, len(tok))
		ok := true
		for _, r := range tok {
			b, in := pretokenizer.CharBytes[string(r)]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if ok {
			out[i] = string(buf)
		} else {
			out[i] = tok
		}
	}
	return out
}
