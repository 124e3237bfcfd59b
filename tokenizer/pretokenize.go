package tokenizer

// The pre-tokenizers, as the Rust library's pre_tokenizers/*.rs: each
// splits every piece into smaller ones and drops the empty ones. Offsets
// are not computed: a piece is its text and whether it starts at the
// input's first byte.

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

func init() {
	preTokenizerTypes["ByteLevel"] = newByteLevelPre
	preTokenizerTypes["Split"] = newSplit
	preTokenizerTypes["Metaspace"] = newMetaspace
	preTokenizerTypes["Whitespace"] = func(json.RawMessage, string) (preTokenizer, error) { return whitespacePre{}, nil }
	preTokenizerTypes["WhitespaceSplit"] = func(json.RawMessage, string) (preTokenizer, error) {
		return runeSplit{is: isWhite, behavior: removed}, nil
	}
	preTokenizerTypes["Digits"] = newDigits
	preTokenizerTypes["Punctuation"] = newPunctuation
	preTokenizerTypes["Sequence"] = newPreSequence
}

// span is a part of a text, a match of a pattern or not (the Rust
// library's find_matches: the spans cover the text, in order).
type span struct {
	start, end int
	match      bool
}

// behavior is what a split does with the delimiters (the matches).
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{
	"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

// parseBehavior reads a behavior field; a missing one is an error (the
// Rust library has no default but for Punctuation's, given as def).
func parseBehavior(raw *string, path string, def *behavior) (behavior, error) {
	if raw == nil {
		if def != nil {
			return *def, nil
		}
		return 0, &FieldError{Field: path, Reason: "missing (one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)"}
	}
	b, ok := behaviors[*raw]
	if !ok {
		return 0, &FieldError{Field: path, Value: fmt.Sprintf("%q", *raw), Reason: "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous is allowed"}
	}
	return b, nil
}

// groupSpans applies b to spans as NormalizedString::split does: the
// parts to keep, in order (empty ones included).
func groupSpans(spans []span, b behavior) []span {
	out := make([]span, 0, len(spans))
	prevMatch := false
	switch b {
	case isolated:
		for _, s := range spans {
			out = append(out, span{s.start, s.end, false})
		}
		return out
	case removed:
		for _, s := range spans {
			if !s.match {
				out = append(out, s)
			}
		}
		return out
	case mergedWithNext:
		return mergeWithNext(spans)
	}
	for _, s := range spans {
		join := s.match == prevMatch // Contiguous: the same kind as the previous
		if b == mergedWithPrevious {
			join = s.match && !prevMatch
		}
		if join && len(out) > 0 {
			out[len(out)-1].end = s.end
		} else {
			out = append(out, span{s.start, s.end, false})
		}
		prevMatch = s.match
	}
	return out
}

// mergeWithNext joins each match (after a non-match, walking backwards)
// to the part that follows it.
func mergeWithNext(spans []span) []span {
	rev := make([]span, 0, len(spans))
	prevMatch := false
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		if s.match && !prevMatch && len(rev) > 0 {
			rev[len(rev)-1].start = s.start
		} else {
			rev = append(rev, span{s.start, s.end, false})
		}
		prevMatch = s.match
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// splitPieces splits each piece by find and b, keeping the non-empty
// parts; a part is first if its piece is and it starts the piece.
func splitPieces(pieces []piece, find func(string) []span, b behavior) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		for _, s := range groupSpans(find(p.text), b) {
			if s.end > s.start {
				out = append(out, piece{text: p.text[s.start:s.end], first: p.first && s.start == 0})
			}
		}
	}
	return out
}

// runeSpans is find_matches for a rune predicate: each matching rune is
// a match of its own.
func runeSpans(s string, is func(rune) bool) []span {
	if s == "" {
		return []span{{0, 0, false}}
	}
	var out []span
	last := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if is(r) {
			if last < i {
				out = append(out, span{last, i, false})
			}
			out = append(out, span{i, i + n, true})
			last = i + n
		}
		i += n
	}
	if last < len(s) {
		out = append(out, span{last, len(s), false})
	}
	return out
}

// runeSplit splits on the runes is matches.
type runeSplit struct {
	is       func(rune) bool
	behavior behavior
}

func (r runeSplit) preTokenize(pieces []piece) []piece {
	return splitPieces(pieces, func(s string) []span { return runeSpans(s, r.is) }, r.behavior)
}

// isWhite is Rust's char::is_whitespace (Unicode White_Space).
func isWhite(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// newDigits builds Digits: numbers (Rust's char::is_numeric: Nd, Nl, No)
// apart, each digit alone with individual_digits.
func newDigits(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		Individual *bool `json:"individual_digits"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.Individual == nil {
		return nil, &FieldError{Field: path + ".individual_digits", Reason: "missing (true or false)"}
	}
	b := contiguous
	if *c.Individual {
		b = isolated
	}
	return runeSplit{is: unicode.IsNumber, behavior: b}, nil
}

// isPunct is the Rust library's is_punc: ASCII punctuation (symbols such
// as $ + < = > ^ ` | ~ included) or a Unicode P* character.
func isPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return r > ' ' && r < 0x7f && !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}
	return unicode.IsPunct(r)
}

// newPunctuation builds Punctuation (behavior: Isolated unless given).
func newPunctuation(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		Behavior *string `json:"behavior"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	def := isolated
	b, err := parseBehavior(c.Behavior, path+".behavior", &def)
	if err != nil {
		return nil, err
	}
	return runeSplit{is: isPunct, behavior: b}, nil
}

// preSequence runs its members in order.
type preSequence []preTokenizer

func (s preSequence) preTokenize(pieces []piece) []piece {
	for _, p := range s {
		pieces = p.preTokenize(pieces)
	}
	return pieces
}

func newPreSequence(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		List *[]json.RawMessage `json:"pretokenizers"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.List == nil {
		return nil, &FieldError{Field: path + ".pretokenizers", Reason: "missing (a list of pre-tokenizers)"}
	}
	seq := make(preSequence, 0, len(*c.List))
	for i, m := range *c.List {
		p, err := buildPreTokenizer(m, fmt.Sprintf("%s.pretokenizers[%d]", path, i))
		if err != nil {
			return nil, err
		}
		if p == nil {
			return nil, &FieldError{Field: fmt.Sprintf("%s.pretokenizers[%d]", path, i), Value: "null", Reason: "a pre-tokenizer object is expected"}
		}
		seq = append(seq, p)
	}
	return seq, nil
}

// whitespacePre is Whitespace: runs of word characters and runs of other
// non-space characters, spaces removed (the Rust library's
// \w+|[^\w\s]+, inverted, Removed).
type whitespacePre struct{}

func (whitespacePre) preTokenize(pieces []piece) []piece {
	return splitPieces(pieces, whitespaceSpans, removed)
}

// whitespaceSpans gives the pattern's matches as non-matches (kept) and
// the rest (spaces) as matches, as Invert does.
func whitespaceSpans(s string) []span {
	if s == "" {
		return []span{{0, 0, false}}
	}
	var out []span
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		kind := charKind(r)
		j := i + n
		for j < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[j:])
			if charKind(r2) != kind {
				break
			}
			j += n2
		}
		out = append(out, span{i, j, kind == 0})
		i = j
	}
	return out
}

// charKind is 0 for a space, 1 for a word character (the regex crate's
// Unicode \w: Alphabetic, M, Nd, Pc, Join_Control), 2 for any other.
func charKind(r rune) int {
	switch {
	case isWhite(r):
		return 0
	case unicode.IsLetter(r), unicode.IsMark(r), unicode.Is(unicode.Nd, r), unicode.Is(unicode.Nl, r),
		unicode.Is(unicode.Pc, r), unicode.Is(unicode.Other_Alphabetic, r), r == 0x200c, r == 0x200d:
		return 1
	}
	return 2
}

// regexSpans is find_matches for a regexp2 pattern. regexp2 counts runes;
// spans are in bytes. As the onig crate's find_iter, an empty match right
// where the previous match ended is skipped.
func regexSpans(re *regexp2.Regexp, s string) []span {
	if s == "" {
		return []span{{0, 0, false}}
	}
	byteAt := make([]int, 0, len(s)+1)
	for i := range s {
		byteAt = append(byteAt, i)
	}
	byteAt = append(byteAt, len(s))
	var out []span
	prev, lastEnd := 0, -1
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		start, end := byteAt[m.Index], byteAt[m.Index+m.Length]
		if start == end && end == lastEnd {
			continue
		}
		if start > prev {
			out = append(out, span{prev, start, false})
		}
		out = append(out, span{start, end, true})
		prev, lastEnd = end, end
	}
	if prev < len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out
}

// literalSpans is find_matches for a non-empty String pattern: its
// occurrences, left to right, not overlapping.
func literalSpans(lit, s string) []span {
	if s == "" {
		return []span{{0, len(s), false}}
	}
	var out []span
	prev := 0
	for {
		i := strings.Index(s[prev:], lit)
		if i < 0 {
			break
		}
		if i > 0 {
			out = append(out, span{prev, prev + i, false})
		}
		out = append(out, span{prev + i, prev + i + len(lit), true})
		prev += i + len(lit)
	}
	if prev < len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out
}

// patternJSON is Split's and Replace's pattern: {"String": s} or
// {"Regex": r}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// compilePattern turns a pattern object into its find_matches. A Regex is
// compiled by regexp2 as the file gives it (Oniguruma syntax, lookaheads
// included, is close to .NET's that regexp2 speaks). An empty String is,
// as the Rust library compiles the escaped string, an empty regex: it
// matches between every two characters.
func compilePattern(p *patternJSON, path string) (func(string) []span, error) {
	switch {
	case p == nil || (p.String == nil) == (p.Regex == nil):
		return nil, &FieldError{Field: path, Reason: `one of {"String": ...} or {"Regex": ...} is expected`}
	case p.String != nil && *p.String != "":
		lit := *p.String
		return func(s string) []span { return literalSpans(lit, s) }, nil
	}
	src, field := "", path+".String"
	if p.Regex != nil {
		src, field = *p.Regex, path+".Regex"
	}
	re, err := compileRegexp(src)
	if err != nil {
		return nil, &FieldError{Field: field, Value: fmt.Sprintf("%q", src), Reason: "does not compile: " + err.Error()}
	}
	return func(s string) []span { return regexSpans(re, s) }, nil
}

// split is Split: a pattern's matches (or, inverted, what is between
// them) are the delimiters.
type split struct {
	find     func(string) []span
	behavior behavior
}

func (sp split) preTokenize(pieces []piece) []piece {
	return splitPieces(pieces, sp.find, sp.behavior)
}

func newSplit(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		Pattern  *patternJSON `json:"pattern"`
		Behavior *string      `json:"behavior"`
		Invert   *bool        `json:"invert"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	find, err := compilePattern(c.Pattern, path+".pattern")
	if err != nil {
		return nil, err
	}
	b, err := parseBehavior(c.Behavior, path+".behavior", nil)
	if err != nil {
		return nil, err
	}
	if c.Invert == nil {
		return nil, &FieldError{Field: path + ".invert", Reason: "missing (true or false)"}
	}
	if *c.Invert {
		inner := find
		find = func(s string) []span {
			spans := inner(s)
			for i := range spans {
				spans[i].match = !spans[i].match
			}
			return spans
		}
	}
	return split{find: find, behavior: b}, nil
}

// byteLevelPre is ByteLevel: a space before each piece not starting with
// one (add_prefix_space), GPT-2's split (use_regex), then each byte as
// its character of GPT-2's alphabet (what the vocabulary's tokens are
// written in). trim_offsets is about offsets, which are not computed.
type byteLevelPre struct {
	addPrefixSpace bool
	re             *regexp2.Regexp // nil: use_regex false
}

// gpt2Split is GPT-2's pattern, ByteLevel's split when use_regex is true.
const gpt2Split = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func newByteLevelPre(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		AddPrefixSpace *bool `json:"add_prefix_space"`
		UseRegex       *bool `json:"use_regex"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.AddPrefixSpace == nil {
		return nil, &FieldError{Field: path + ".add_prefix_space", Reason: "missing (true or false)"}
	}
	b := byteLevelPre{addPrefixSpace: *c.AddPrefixSpace}
	if c.UseRegex == nil || *c.UseRegex {
		re, err := compileRegexp(gpt2Split)
		if err != nil {
			return nil, &FieldError{Field: path + ".use_regex", Reason: "GPT-2's pattern does not compile: " + err.Error()}
		}
		b.re = re
	}
	return b, nil
}

func (b byteLevelPre) preTokenize(pieces []piece) []piece {
	if b.addPrefixSpace {
		spaced := make([]piece, len(pieces))
		for i, p := range pieces {
			spaced[i] = p
			if !strings.HasPrefix(p.text, " ") {
				spaced[i].text = " " + p.text
			}
		}
		pieces = spaced
	}
	if b.re != nil {
		pieces = splitPieces(pieces, func(s string) []span { return regexSpans(b.re, s) }, isolated)
	}
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		if p.text != "" {
			out = append(out, piece{text: byteLevelText(p.text), first: p.first})
		}
	}
	return out
}

// metaspace is Metaspace: spaces (only U+0020: a newline or tab stays
// itself) become the replacement, which is prepended as prepend_scheme
// says, and with split each replacement starts a new piece.
type metaspace struct {
	rep   string
	r     rune
	mode  string // always, first, never
	split bool
}

func newMetaspace(obj json.RawMessage, path string) (preTokenizer, error) {
	var c struct {
		Replacement    *string `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
		Split          *bool   `json:"split"`
	}
	if err := json.Unmarshal(obj, &c); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	if c.Replacement == nil || utf8.RuneCountInString(*c.Replacement) != 1 {
		return nil, &FieldError{Field: path + ".replacement", Reason: "one character is expected"}
	}
	m := metaspace{rep: *c.Replacement, mode: "always", split: c.Split == nil || *c.Split}
	m.r, _ = utf8.DecodeRuneInString(m.rep)
	if c.PrependScheme != nil {
		m.mode = *c.PrependScheme
	}
	if m.mode != "always" && m.mode != "first" && m.mode != "never" {
		return nil, &FieldError{Field: path + ".prepend_scheme", Value: fmt.Sprintf("%q", m.mode), Reason: "one of always, first, never is allowed"}
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		// As the Rust library: false means never; with another scheme (always
		// by default) the file does not load.
		if m.mode != "never" {
			return nil, &FieldError{Field: path + ".add_prefix_space", Value: "false", Reason: "contradicts prepend_scheme " + m.mode}
		}
		m.mode = "never"
	}
	return m, nil
}

func (m metaspace) preTokenize(pieces []piece) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		t := strings.ReplaceAll(p.text, " ", m.rep)
		if !strings.HasPrefix(t, m.rep) && (m.mode == "always" || m.mode == "first" && p.first) {
			t = m.rep + t
		}
		out = append(out, piece{text: t, first: p.first})
	}
	if !m.split {
		return dropEmpty(out)
	}
	return splitPieces(out, func(s string) []span { return runeSpans(s, func(r rune) bool { return r == m.r }) }, mergedWithNext)
}

// dropEmpty drops the empty pieces, as every pre-tokenizer's split does.
func dropEmpty(pieces []piece) []piece {
	out := pieces[:0]
	for _, p := range pieces {
		if p.text != "" {
			out = append(out, p)
		}
	}
	return out
}
