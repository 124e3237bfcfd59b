package tokenizer

// Added tokens (tokenizer.json's added_tokens: <|eot_id|>, <start_of_turn>,
// Gemma's 6,000 <unusedN>...) are split out of the text before the rest
// of the pipeline runs, as the Rust library's AddedVocabulary does with a
// leftmost-longest match. The Go library's own splitting drops tokens when
// several match, numbers them by position instead of their id, and exits
// the process on some errors, so this file does it instead.
//
// Also here: the post-processor's special tokens (Encode with
// addSpecialTokens) and Unicode normalizers (the library's NFC decomposes).

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	sm "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretrained"
	"golang.org/x/text/unicode/norm"
)

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
}

// addedVocab finds added tokens in text.
type addedVocab struct {
	byContent map[string]addedToken
	byID      map[int]string
	lengths   [256][]int // by first byte: the contents' lengths, longest first
}

func newAddedVocab(list []addedToken) *addedVocab {
	v := &addedVocab{byContent: map[string]addedToken{}, byID: map[int]string{}}
	for _, a := range list {
		if a.Content == "" {
			continue
		}
		v.byContent[a.Content] = a
		v.byID[a.ID] = a.Content
		b := a.Content[0]
		if !slices.Contains(v.lengths[b], len(a.Content)) {
			v.lengths[b] = append(v.lengths[b], len(a.Content))
		}
	}
	for i := range v.lengths {
		slices.Sort(v.lengths[i])
		slices.Reverse(v.lengths[i])
	}
	return v
}

// segment is a piece of text: an added token (id >= 0) or text to run
// through the pipeline (id -1).
type segment struct {
	text string
	id   int
}

// split cuts text at added tokens, leftmost-longest; lstrip and rstrip
// tokens take the whitespace beside them, single_word tokens match only
// between non-word characters.
func (v *addedVocab) split(text string) []segment {
	var out []segment
	start := 0 // of the pending plain text
	for i := 0; i < len(text); {
		tok, n, ok := v.matchAt(text, i)
		if !ok {
			i++
			continue
		}
		lo, hi := i, i+n
		if tok.LStrip {
			for lo > start {
				r, size := utf8.DecodeLastRuneInString(text[start:lo])
				if !unicode.IsSpace(r) {
					break
				}
				lo -= size
			}
		}
		if tok.RStrip {
			for hi < len(text) {
				r, size := utf8.DecodeRuneInString(text[hi:])
				if !unicode.IsSpace(r) {
					break
				}
				hi += size
			}
		}
		if lo > start {
			out = append(out, segment{text: text[start:lo], id: -1})
		}
		out = append(out, segment{text: text[lo:hi], id: tok.ID})
		start, i = hi, hi
	}
	if start < len(text) {
		out = append(out, segment{text: text[start:], id: -1})
	}
	return out
}

func (v *addedVocab) matchAt(text string, i int) (addedToken, int, bool) {
	for _, n := range v.lengths[text[i]] {
		if i+n > len(text) {
			continue
		}
		tok, ok := v.byContent[text[i:i+n]]
		if !ok {
			continue
		}
		if tok.SingleWord && (isWordBefore(text, i) || isWordAfter(text, i+n)) {
			continue
		}
		return tok, n, true
	}
	return addedToken{}, 0, false
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func isWordBefore(text string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return i > 0 && isWord(r)
}

func isWordAfter(text string, i int) bool {
	r, _ := utf8.DecodeRuneInString(text[i:])
	return i < len(text) && isWord(r)
}

// postProcessorJSON is tokenizer.json's post_processor, the fields of
// every type it takes.
type postProcessorJSON struct {
	Type       string            `json:"type"`
	Processors []json.RawMessage `json:"processors"`
	Single     []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct{} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
	Cls []any `json:"cls"` // [token, id]
	Sep []any `json:"sep"`
}

// postProcessor gives the special token ids that tokenizer.json's
// post_processor puts around a single sequence.
func postProcessor(raw json.RawMessage) (prefix, suffix []uint32, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var p postProcessorJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, err
	}
	switch p.Type {
	case "ByteLevel":
		return nil, nil, nil // offsets only
	case "Sequence":
		for i, q := range p.Processors {
			pre, suf, err := postProcessor(q)
			if err != nil {
				return nil, nil, fmt.Errorf("processors[%d]: %w", i, err)
			}
			prefix = append(prefix, pre...)
			suffix = append(suf, suffix...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		return p.template()
	case "BertProcessing", "RobertaProcessing":
		if prefix, err = p.tokenID(p.Cls); err != nil {
			return nil, nil, err
		}
		suffix, err = p.tokenID(p.Sep)
		return prefix, suffix, err
	}
	return nil, nil, fmt.Errorf("type %q is not supported (TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence are)", p.Type)
}

// template is TemplateProcessing's special tokens of single: those before
// the sequence, and those after it.
func (p *postProcessorJSON) template() (prefix, suffix []uint32, err error) {
	seen := false
	for _, e := range p.Single {
		switch {
		case e.Sequence != nil:
			seen = true
		case e.SpecialToken != nil:
			st, ok := p.SpecialTokens[e.SpecialToken.ID]
			if !ok {
				return nil, nil, fmt.Errorf("TemplateProcessing: special token %q is not in special_tokens", e.SpecialToken.ID)
			}
			if seen {
				suffix = append(suffix, st.IDs...)
			} else {
				prefix = append(prefix, st.IDs...)
			}
		}
	}
	return prefix, suffix, nil
}

// tokenID is the id of Bert's and Roberta's cls or sep, a [token, id] pair.
func (p *postProcessorJSON) tokenID(pair []any) ([]uint32, error) {
	if len(pair) != 2 {
		return nil, fmt.Errorf("%s: cls and sep are [token, id]", p.Type)
	}
	f, ok := pair[1].(float64)
	if !ok {
		return nil, fmt.Errorf("%s: cls and sep are [token, id]", p.Type)
	}
	return []uint32{uint32(f)}, nil
}

// normalizerFor builds a normalizer, taking the Unicode forms (also
// inside a Sequence) and leaving the others to the library.
func normalizerFor(c map[string]any) (normalizer.Normalizer, error) {
	typ, _ := c["type"].(string)
	switch typ {
	case "NFC":
		return unicodeForm{norm.NFC}, nil
	case "NFD":
		return unicodeForm{norm.NFD}, nil
	case "NFKC":
		return unicodeForm{norm.NFKC}, nil
	case "NFKD":
		return unicodeForm{norm.NFKD}, nil
	case "Replace":
		return replace(c)
	case "Sequence":
		list, ok := c["normalizers"].([]any)
		if !ok {
			return nil, fmt.Errorf("a Sequence without a normalizers list")
		}
		var seq []normalizer.Normalizer
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("normalizers[%d] is not an object", i)
			}
			n, err := normalizerFor(m)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			seq = append(seq, n)
		}
		return normalizer.NewSequence(seq), nil
	}
	return pretrained.CreateNormalizer(c)
}

// unicodeForm applies a Unicode normal form, keeping the alignment of
// each segment (a base character and its marks) to the input.
type unicodeForm struct{ form norm.Form }

func (u unicodeForm) Normalize(n *normalizer.NormalizedString) (*normalizer.NormalizedString, error) {
	s := n.GetNormalized()
	if u.form.IsNormalString(s) {
		return n, nil
	}
	var changes []normalizer.ChangeMap
	var it norm.Iter
	it.InitString(u.form, s)
	for !it.Done() {
		from := it.Pos()
		out := it.Next()
		in := utf8.RuneCountInString(s[from:it.Pos()])
		k := 0
		for len(out) > 0 {
			r, size := utf8.DecodeRune(out)
			out = out[size:]
			c := 0
			if k >= in {
				c = 1 // a character more than the input had
			}
			changes = append(changes, normalizer.ChangeMap{RuneVal: string(r), Changes: c})
			k++
		}
		if k < in && k > 0 {
			changes[len(changes)-1].Changes = -(in - k) // characters composed away
		}
	}
	return n.Transform(changes, 0), nil
}

var _ sm.PreTokenizer = (*byteLevelPre)(nil)
