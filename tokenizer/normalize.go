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
// assigned since: those are left as they are here too (since9Normalizing,
// since9Marks). Lowercase uses Go's case tables (15.0), the Rust std's are
// newer (16.0): the cased letters added in 16.0 (such as U+1C89, U+A7CB)
// are kept here, lowercased there.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

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

// unicodeForm is NFC, NFD, NFKC or NFKD, as the Rust library's Unicode
// 9.0 tables give it (see since9Normalizing) and with no limit on a run
// of combining marks (Go's norm puts U+034F after 30 of them, the Stream-
// Safe Text Format; the Rust library's nfc() does not).
type unicodeForm struct{ form norm.Form }

func (u unicodeForm) normalize(s string) string {
	if u.form.IsNormalString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r >= 0x7fd && inRanges(since9Normalizing, r) {
			sb.WriteString(u.part(s[start:i]))
			sb.WriteString(s[i : i+n])
			start = i + n
		}
		i += n
	}
	sb.WriteString(u.part(s[start:]))
	return sb.String()
}

// part normalizes text without a character new since Unicode 9.0.
func (u unicodeForm) part(s string) string {
	if !longMarkRun(s) {
		return u.form.String(s)
	}
	return u.slow(s)
}

// slow is the normalization done here: decomposition, canonical ordering
// and composition, with Go's tables for each character.
func (u unicodeForm) slow(s string) string {
	compat := u.form == norm.NFKC || u.form == norm.NFKD
	dec := norm.NFD
	if compat {
		dec = norm.NFKD
	}
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(dec.String(string(r)))...)
	}
	reorder(rs)
	if u.form == norm.NFC || u.form == norm.NFKC {
		rs = compose(rs)
	}
	return string(rs)
}

// ccc is r's canonical combining class.
func ccc(r rune) uint8 {
	var b [utf8.UTFMax]byte
	return norm.NFD.Properties(utf8.AppendRune(b[:0], r)).CCC()
}

// longMarkRun reports whether s has 30 or more combining marks in a row
// (decomposed), where Go's norm would add U+034F.
func longMarkRun(s string) bool {
	run := 0
	for _, r := range norm.NFKD.String(s) {
		if ccc(r) == 0 {
			run = 0
		} else if run++; run >= 30 {
			return true
		}
	}
	return false
}

// reorder sorts each run of combining marks by combining class, keeping
// the order of equal classes (the canonical ordering).
func reorder(rs []rune) {
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		if j > i+1 {
			run := rs[i:j]
			sort.SliceStable(run, func(a, b int) bool { return ccc(run[a]) < ccc(run[b]) })
		}
		i = j + 1
	}
}

// compose is the canonical composition of decomposed, ordered runes: a
// character joins the last starter unless a character between them, left
// uncomposed, has a class of 0 or not lower than its own.
func compose(rs []rune) []rune {
	out := rs[:0]
	starter := -1
	for _, c := range rs {
		cc := ccc(c)
		if starter >= 0 {
			adjacent := len(out)-1 == starter
			if adjacent || cc != 0 && ccc(out[len(out)-1]) < cc {
				if p, ok := composePair(out[starter], c); ok {
					out[starter] = p
					continue
				}
			}
		}
		if cc == 0 {
			starter = len(out)
		}
		out = append(out, c)
	}
	return out
}

// composePair is a and b's primary composite, if any: NFC of the two is
// one character.
func composePair(a, b rune) (rune, bool) {
	s := norm.NFC.String(string([]rune{a, b}))
	r, n := utf8.DecodeRuneInString(s)
	return r, n == len(s) && s != ""
}

// since9Normalizing are the characters assigned after Unicode 9.0 that Go's
// tables (15.0) decompose, give a combining class or compose: for the Rust
// library (Unicode 9.0) they are unassigned, starters left as they are
// (U+1FBF5 stays, not NFKC's 5). Generated from the difference of the two
// tables (unicode-normalization-alignments 0.1.12's tables.rs and
// golang.org/x/text v0.42.0).
var since9Normalizing = [][2]rune{{0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C}, {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0x32FF, 0x32FF}, {0xA7F2, 0xA7F4}, {0xA82C, 0xA82C}, {0xAB69, 0xAB69}, {0x10781, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9}}

// since9Marks are the combining marks assigned after Unicode 9.0, which the
// Rust library's StripAccents keeps.
var since9Marks = [][2]rune{{0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xAFA, 0xAFF}, {0xB55, 0xB55}, {0xC04, 0xC04}, {0xC3C, 0xC3C}, {0xCF3, 0xCF3}, {0xD00, 0xD00}, {0xD3B, 0xD3C}, {0xD81, 0xD81}, {0xEBA, 0xEBA}, {0xECE, 0xECE}, {0x1715, 0x1715}, {0x180F, 0x180F}, {0x1ABF, 0x1ACE}, {0x1CF7, 0x1CF7}, {0x1DF6, 0x1DFA}, {0xA82C, 0xA82C}, {0xA8FF, 0xA8FF}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074}, {0x110C2, 0x110C2}, {0x11145, 0x11146}, {0x111C9, 0x111C9}, {0x111CE, 0x111CF}, {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x1182C, 0x1183A}, {0x11930, 0x11935}, {0x11937, 0x11938}, {0x1193B, 0x1193E}, {0x11940, 0x11940}, {0x11942, 0x11943}, {0x119D1, 0x119D7}, {0x119DA, 0x119E0}, {0x119E4, 0x119E4}, {0x11A01, 0x11A0A}, {0x11A33, 0x11A39}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47}, {0x11A51, 0x11A5B}, {0x11A8A, 0x11A99}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45}, {0x11D47, 0x11D47}, {0x11D8A, 0x11D8E}, {0x11D90, 0x11D91}, {0x11D93, 0x11D97}, {0x11EF3, 0x11EF6}, {0x11F00, 0x11F01}, {0x11F03, 0x11F03}, {0x11F34, 0x11F3A}, {0x11F3E, 0x11F42}, {0x13440, 0x13440}, {0x13447, 0x13455}, {0x16F4F, 0x16F4F}, {0x16F7F, 0x16F87}, {0x16FE4, 0x16FE4}, {0x16FF0, 0x16FF1}, {0x1CF00, 0x1CF2D}, {0x1CF30, 0x1CF46}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}}

// inRanges reports whether r is in one of the sorted ranges.
func inRanges(ranges [][2]rune, r rune) bool {
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i][1] >= r })
	return i < len(ranges) && ranges[i][0] <= r
}

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
		if unicode.IsMark(r) && !inRanges(since9Marks, r) {
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
