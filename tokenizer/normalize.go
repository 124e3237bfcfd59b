package tokenizer

// The normalizers, as the Rust library's normalizers/*.rs, each on one
// segment (the text between added tokens). Offsets are not tracked, so a
// form that changes the text's length (NFKC's ﬁ → fi) needs no alignment
// and cannot duplicate or cut a character.
//
// Unicode versions: the Rust library normalizes (and finds combining
// marks for StripAccents) with unicode-normalization-alignments 0.1.12,
// whose tables are Unicode 9.0.0; golang.org/x/text/unicode/norm and Go's
// unicode package are Unicode 15.0.0. Normalization is stable for
// characters assigned by 9.0, so the two differ only on characters
// assigned since (U+1FBF0..U+1FBF9, the segmented digits of Unicode 13:
// NFKC makes them ASCII digits here, the Rust library keeps them; marks
// added since 9.0 are reordered and stripped here, kept there).

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

func init() {
	for name, f := range map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD} {
		form := unicodeForm{f}
		normalizerTypes[name] = func(json.RawMessage, string) (normalizer, error) { return form, nil }
	}
	normalizerTypes["Lowercase"] = func(json.RawMessage, string) (normalizer, error) { return lowercase{}, nil }
	normalizerTypes["StripAccents"] = func(json.RawMessage, string) (normalizer, error) { return stripAccents{}, nil }
	normalizerTypes["Nmt"] = func(json.RawMessage, string) (normalizer, error) { return nmt{}, nil }
	normalizerTypes["ByteLevel"] = func(json.RawMessage, string) (normalizer, error) { return byteLevelNorm{}, nil }
	normalizerTypes["Strip"] = newStrip
	normalizerTypes["Replace"] = newReplace
	normalizerTypes["Prepend"] = newPrepend
	normalizerTypes["Sequence"] = newNormSequence
	normalizerTypes["BertNormalizer"] = refused("BertNormalizer (with WordPiece models, which are not supported) is not implemented")
	normalizerTypes["Precompiled"] = refused("Precompiled (a SentencePiece charsmap) is not implemented: its exact rules are in the compiled map")
}

// refused is the factory of a normalizer the package does not implement
// exactly: the file is refused, saying why.
func refused(reason string) normalizerFactory {
	return func(_ json.RawMessage, path string) (normalizer, error) {
		return nil, &FieldError{Field: path + ".type", Reason: reason}
	}
}

// unicodeForm is NFC, NFD, NFKC or NFKD.
type unicodeForm struct{ form norm.Form }

func (u unicodeForm) normalize(s string) string { return u.form.String(s) }

// lowercase is Rust's char::to_lowercase on each character: the full
// mapping, so İ (U+0130) is i and U+0307; and no final-sigma rule (Σ is
// always σ: transformers.js, lowercasing the whole string in JavaScript,
// gives ς at a word's end).
type lowercase struct{}

func (lowercase) normalize(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if r == 'İ' {
			sb.WriteString("i\u0307")
			continue
		}
		sb.WriteRune(unicode.ToLower(r))
	}
	return sb.String()
}

// stripAccents drops the combining marks (M*).
type stripAccents struct{}

func (stripAccents) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsMark(r) {
			return -1
		}
		return r
	}, s)
}

// nmt drops ASCII control characters and makes the other spaces a space.
type nmt struct{}

func (nmt) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 1 && r <= 8, r == 0xb, r >= 0xe && r <= 0x1f, r == 0x7f, r == 0x8f, r == 0x9f:
			return -1
		case r == 9, r == 0xa, r == 0xc, r == 0xd, r == 0x1680, r >= 0x200b && r <= 0x200f,
			r == 0x2028, r == 0x2029, r == 0x2581, r == 0xfeff, r == 0xfffd:
			return ' '
		}
		return r
	}, s)
}

// byteLevelNorm writes each byte in GPT-2's alphabet.
type byteLevelNorm struct{}

func (byteLevelNorm) normalize(s string) string { return byteLevelText(s) }

// strip removes White_Space at the left, the right, or both.
type strip struct{ left, right bool }

func (st strip) normalize(s string) string {
	if st.left {
		s = strings.TrimLeftFunc(s, isWhite)
	}
	if st.right {
		s = strings.TrimRightFunc(s, isWhite)
	}
	return s
}

func newStrip(obj json.RawMessage, path string) (normalizer, error) {
	var c struct {
		Left  *bool `json:"strip_left"`
		Right *bool `json:"strip_right"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.Left == nil {
		return nil, &FieldError{Field: path + ".strip_left", Reason: "missing (true or false)"}
	}
	if c.Right == nil {
		return nil, &FieldError{Field: path + ".strip_right", Reason: "missing (true or false)"}
	}
	return strip{left: *c.Left, right: *c.Right}, nil
}

// replace puts content in place of each match of the pattern.
type replace struct {
	find    func(string) []span
	content string
}

func (r replace) normalize(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, sp := range r.find(s) {
		if sp.match {
			sb.WriteString(r.content)
		} else {
			sb.WriteString(s[sp.start:sp.end])
		}
	}
	return sb.String()
}

func newReplace(obj json.RawMessage, path string) (normalizer, error) {
	var c struct {
		Pattern *patternJSON `json:"pattern"`
		Content *string      `json:"content"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	find, err := compilePattern(c.Pattern, path+".pattern")
	if err != nil {
		return nil, err
	}
	if c.Content == nil {
		return nil, &FieldError{Field: path + ".content", Reason: "missing (a string)"}
	}
	return replace{find: find, content: *c.Content}, nil
}

// prepend puts its text before a non-empty segment.
type prepend struct{ text string }

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return p.text + s
}

func newPrepend(obj json.RawMessage, path string) (normalizer, error) {
	var c struct {
		Prepend *string `json:"prepend"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.Prepend == nil {
		return nil, &FieldError{Field: path + ".prepend", Reason: "missing (a string)"}
	}
	return prepend{text: *c.Prepend}, nil
}

// normSequence runs its members in order.
type normSequence []normalizer

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

func newNormSequence(obj json.RawMessage, path string) (normalizer, error) {
	var c struct {
		List *[]json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.List == nil {
		return nil, &FieldError{Field: path + ".normalizers", Reason: "missing (a list of normalizers)"}
	}
	seq := make(normSequence, 0, len(*c.List))
	for i, m := range *c.List {
		at := fmt.Sprintf("%s.normalizers[%d]", path, i)
		n, err := buildNormalizer(m, at)
		if err != nil {
			return nil, err
		}
		if n == nil {
			return nil, &FieldError{Field: at, Value: "null", Reason: "a normalizer object is expected"}
		}
		seq = append(seq, n)
	}
	return seq, nil
}
