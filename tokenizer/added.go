package tokenizer

// Added tokens (tokenizer.json's added_tokens), split out of the input as
// the Rust library's AddedVocabulary (tokenizer/added_vocabulary.rs)
// does: first the tokens not marked normalized, on the raw text; then each
// remaining segment is normalized and the tokens marked normalized (by
// their normalized content) are split out of it. Both matches are
// leftmost-longest and resume after the matched content (not after what
// lstrip/rstrip took), as its Aho-Corasick iteration does.

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// addedJSON is one entry of added_tokens; every field is required, as in
// the Rust library.
type addedJSON struct {
	ID         *uint32 `json:"id"`
	Content    *string `json:"content"`
	SingleWord *bool   `json:"single_word"`
	LStrip     *bool   `json:"lstrip"`
	RStrip     *bool   `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    *bool   `json:"special"`
}

type addedToken struct {
	id                         uint32
	content                    string
	singleWord, lstrip, rstrip bool
	normalized, special        bool
	form                       string // what is matched: content, or its normalized form
}

// matcher finds a set of strings, leftmost-longest.
type matcher struct {
	byText  map[string]*addedToken
	lengths [256][]int // by first byte: the lengths, longest first
}

func (m *matcher) add(t *addedToken) {
	m.byText[t.form] = t
	b := t.form[0]
	if !slices.Contains(m.lengths[b], len(t.form)) {
		m.lengths[b] = append(m.lengths[b], len(t.form))
		slices.Sort(m.lengths[b])
		slices.Reverse(m.lengths[b])
	}
}

// find returns the leftmost-longest match at or after from.
func (m *matcher) find(s string, from int) (*addedToken, int, bool) {
	if len(m.byText) == 0 {
		return nil, 0, false
	}
	for i := from; i < len(s); i++ {
		for _, n := range m.lengths[s[i]] {
			if i+n <= len(s) {
				if t, ok := m.byText[s[i:i+n]]; ok {
					return t, i, true
				}
			}
		}
	}
	return nil, 0, false
}

// addedVocab is the added tokens and their two matchers.
type addedVocab struct {
	byContent map[string]*addedToken
	byID      map[uint32]*addedToken
	raw, norm matcher // not normalized; normalized
}

// newAddedVocab reads added_tokens (at path) as the Rust library adds
// them: a token's id is its content's id (an earlier added token's, else
// the model's), else the next one after the model's vocabulary. A file
// whose ids disagree with that is refused rather than encoded as it says.
func newAddedVocab(raw json.RawMessage, path string, m *bpe, n normalizer) (*addedVocab, error) {
	v := &addedVocab{byContent: map[string]*addedToken{}, byID: map[uint32]*addedToken{}}
	v.raw.byText, v.norm.byText = map[string]*addedToken{}, map[string]*addedToken{}
	var list []addedJSON
	if len(raw) != 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, &FieldError{Field: path, Reason: "a list of added token objects expected: " + err.Error()}
		}
	}
	next := uint32(m.vocab.len())
	for i, e := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		t, err := e.token(p)
		if err != nil {
			return nil, err
		}
		if t.content == "" {
			continue // ignored, as the Rust library does
		}
		want, ok := v.idOf(t.content, m)
		if !ok {
			want, next = next, next+1
		}
		if t.id != want {
			return nil, &FieldError{Field: p + ".id", Value: fmt.Sprint(t.id), Reason: fmt.Sprintf("the Rust library gives %q the id %d", t.content, want)}
		}
		if old, ok := v.byID[t.id]; ok && old.content != t.content {
			return nil, &FieldError{Field: p + ".id", Value: fmt.Sprint(t.id), Reason: "given to two added tokens"}
		}
		if old, ok := v.byContent[t.content]; ok && old.special {
			t.special = true // a repeated entry: the Rust library's special set keeps it
		}
		v.byContent[t.content], v.byID[t.id] = t, t
	}
	return v, v.buildMatchers(path, n)
}

func (v *addedVocab) idOf(content string, m *bpe) (uint32, bool) {
	if t, ok := v.byContent[content]; ok {
		return t.id, true
	}
	id, ok := m.vocab.get(content)
	return id, ok
}

// token checks one entry's fields.
func (e addedJSON) token(path string) (*addedToken, error) {
	for _, f := range []struct {
		name string
		set  bool
	}{{"id", e.ID != nil}, {"content", e.Content != nil}, {"single_word", e.SingleWord != nil}, {"lstrip", e.LStrip != nil}, {"rstrip", e.RStrip != nil}, {"normalized", e.Normalized != nil}, {"special", e.Special != nil}} {
		if !f.set {
			return nil, &FieldError{Field: path + "." + f.name, Reason: "missing"}
		}
	}
	return &addedToken{id: *e.ID, content: *e.Content, singleWord: *e.SingleWord, lstrip: *e.LStrip, rstrip: *e.RStrip, normalized: *e.Normalized, special: *e.Special}, nil
}

// buildMatchers fills the two matchers; a normalized token is matched by
// its content normalized.
func (v *addedVocab) buildMatchers(path string, n normalizer) error {
	ids := make([]uint32, 0, len(v.byID))
	for id := range v.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := v.byID[id]
		t.form = t.content
		m := &v.raw
		if t.normalized {
			m = &v.norm
			if n != nil {
				t.form = n.normalize(t.content)
			}
		}
		if t.form == "" {
			return &FieldError{Field: path, Value: fmt.Sprintf("%q", t.content), Reason: "this added token normalizes to nothing"}
		}
		if other, ok := m.byText[t.form]; ok {
			return &FieldError{Field: path, Value: fmt.Sprintf("%q", t.content), Reason: fmt.Sprintf("matches as %q does (the Rust library refuses the file)", other.content)}
		}
		m.add(t)
	}
	return nil
}

// segment is a part of the input: an added token (tok != nil) or text to
// pre-tokenize, first when it starts at the input's first byte.
type segment struct {
	tok   *addedToken
	text  string
	first bool
}

// split cuts text at added tokens and normalizes the text between them.
func (v *addedVocab) split(text string, n normalizer) []segment {
	var out []segment
	for _, s := range v.raw.splitText(text, true) {
		if s.tok != nil {
			out = append(out, s)
			continue
		}
		if n != nil {
			s.text = n.normalize(s.text)
		}
		for _, t := range v.norm.splitText(s.text, s.first) {
			if t.tok != nil || t.text != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// splitText is find_matches: the matches with single_word, lstrip and
// rstrip applied, and the non-empty text between them.
func (m *matcher) splitText(s string, first bool) []segment {
	var out []segment
	done := 0 // the end of the last split
	for from := 0; ; {
		t, start, ok := m.find(s, from)
		if !ok {
			break
		}
		stop := start + len(t.form)
		from = stop
		if t.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(leftmostSpaceAtEnd(s[:start]), done)
		}
		if t.rstrip {
			stop += len(s[stop:]) - len(trimSpaceLeft(s[stop:]))
		}
		if done < start {
			out = append(out, segment{text: s[done:start], first: first && done == 0})
		}
		out = append(out, segment{tok: t, text: s[start:stop]})
		done = stop
	}
	if done < len(s) {
		out = append(out, segment{text: s[done:], first: first && done == 0})
	}
	return out
}

// isWord is the Rust regex crate's \w: Alphabetic, marks, decimal
// digits, connector punctuation and the joiners.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, size := utf8.DecodeLastRuneInString(s)
	return size > 0 && isWord(r)
}

func startsWithWord(s string) bool {
	r, size := utf8.DecodeRuneInString(s)
	return size > 0 && isWord(r)
}

// leftmostSpaceAtEnd is where the white space that ends s begins.
func leftmostSpaceAtEnd(s string) int {
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-size]
	}
	return len(s)
}

func trimSpaceLeft(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[size:]
	}
	return s
}
