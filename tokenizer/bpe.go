package tokenizer

// The BPE model (tokenizer.json's "model" with type "BPE"), as the Rust
// library's models/bpe (model.rs merge_word, word.rs merge_all) does it
// without dropout: a pre-token's characters (with continuing_subword_prefix
// and end_of_word_suffix), or, missing from the vocabulary, their <0xNN>
// byte tokens when byte_fallback and every one exists, else unk_token
// (fused with fuse_unk), are merged lowest rank first, leftmost first
// among equal ranks, with a priority queue over adjacent pairs.

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeJSON is the model object. Pointers tell a JSON null from a value.
type bpeJSON struct {
	Type         string          `json:"type"`
	Vocab        json.RawMessage `json:"vocab"` // scan.go reads it
	Merges       json.RawMessage `json:"merges"`
	UnkToken     *string         `json:"unk_token"`
	FuseUnk      *bool           `json:"fuse_unk"`
	ByteFallback *bool           `json:"byte_fallback"`
	IgnoreMerges *bool           `json:"ignore_merges"`
	Prefix       *string         `json:"continuing_subword_prefix"`
	Suffix       *string         `json:"end_of_word_suffix"`
	Dropout      *float64        `json:"dropout"`
}

// bpe is the model the pipeline runs.
var _ model = (*bpe)(nil)

type mergeRule struct{ rank, id uint32 }

type bpe struct {
	vocab        map[string]uint32
	merges       map[[2]uint32]mergeRule
	unk          uint32
	hasUnk       bool
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string
	suffix       string
	byteIDs      [256]int64 // -1: the vocabulary has no <0xNN>

	mu    sync.RWMutex
	cache map[string][]uint32 // merged pre-tokens shorter than cacheMaxLen
}

// The Rust library's cache: 10,000 pre-tokens of under 256 bytes, filled
// until full.
const (
	cacheCapacity = 10000
	cacheMaxLen   = 256
)

// buildBPE builds the model object at path.
func buildBPE(obj json.RawMessage, path string) (*bpe, error) {
	// One pass over the (large) object; the type is checked before a
	// decoding error is reported, since another model's fields differ.
	var j bpeJSON
	jerr := json.Unmarshal(obj, &j)
	if jerr != nil {
		typ, err := typeOf(obj, path)
		if err != nil {
			return nil, err
		}
		j.Type = typ
	}
	if j.Type != "BPE" {
		return nil, &FieldError{Field: path + ".type", Value: fmt.Sprintf("%q", j.Type), Reason: "this model is not supported (BPE is)"}
	}
	if jerr != nil {
		return nil, &FieldError{Field: path, Reason: "malformed: " + jerr.Error()}
	}
	if j.Dropout != nil && *j.Dropout != 0 {
		return nil, &FieldError{Field: path + ".dropout", Value: fmt.Sprint(*j.Dropout), Reason: "not supported (null or 0 is: dropout is for training)"}
	}
	vocab, err := scanVocab(j.Vocab)
	if err != nil {
		return nil, &FieldError{Field: path + ".vocab", Reason: "malformed: " + err.Error()}
	}
	if vocab == nil {
		return nil, &FieldError{Field: path + ".vocab", Reason: "missing"}
	}
	m := &bpe{vocab: vocab, cache: map[string][]uint32{}}
	m.fuseUnk = j.FuseUnk != nil && *j.FuseUnk
	m.byteFallback = j.ByteFallback != nil && *j.ByteFallback
	m.ignoreMerges = j.IgnoreMerges != nil && *j.IgnoreMerges
	if j.Prefix != nil {
		m.prefix = *j.Prefix
	}
	if j.Suffix != nil {
		m.suffix = *j.Suffix
	}
	if j.UnkToken != nil {
		id, ok := m.vocab[*j.UnkToken]
		if !ok {
			// The Rust library fails every encode that needs it.
			return nil, &FieldError{Field: path + ".unk_token", Value: fmt.Sprintf("%q", *j.UnkToken), Reason: "not in the vocabulary"}
		}
		m.unk, m.hasUnk = id, true
	}
	for b := range 256 {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = int64(id)
		}
	}
	pairs, err := readMerges(j.Merges, path+".merges")
	if err != nil {
		return nil, err
	}
	return m, m.setMerges(pairs, path+".merges")
}

// readMerges reads merges in either form: ["a b", ...] (lines of
// merges.txt, "#version" lines skipped) or [["a", "b"], ...].
func readMerges(raw json.RawMessage, path string) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, &FieldError{Field: path, Reason: "missing"}
	}
	var pairs [][2]string
	if pairForm(raw) {
		list, err := scanPairs(raw)
		if err != nil {
			return nil, &FieldError{Field: path, Reason: `a list of "a b" strings or of ["a", "b"] pairs expected`}
		}
		for i, p := range list {
			if len(p) != 2 {
				return nil, &FieldError{Field: fmt.Sprintf("%s[%d]", path, i), Reason: `a pair ["a", "b"] expected`}
			}
			pairs = append(pairs, [2]string{p[0], p[1]})
		}
		return pairs, nil
	}
	lines, err := scanLines(raw)
	if err != nil {
		return nil, &FieldError{Field: path, Reason: `a list of "a b" strings or of ["a", "b"] pairs expected`}
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "#version") {
			continue
		}
		parts := strings.Split(l, " ")
		if len(parts) != 2 {
			return nil, &FieldError{Field: fmt.Sprintf("%s[%d]", path, i), Value: fmt.Sprintf("%q", l), Reason: "not two tokens separated by one space"}
		}
		pairs = append(pairs, [2]string{parts[0], parts[1]})
	}
	return pairs, nil
}

// pairForm says whether a merges list's first element is a list.
func pairForm(raw json.RawMessage) bool {
	seen := false
	for _, c := range raw {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == '[' && !seen:
			seen = true
		default:
			return seen && c == '['
		}
	}
	return false
}

// setMerges ranks pairs by position (a repeated pair keeps its last rank,
// as the Rust library's map does); every token must be in the vocabulary.
func (m *bpe) setMerges(pairs [][2]string, path string) error {
	m.merges = make(map[[2]uint32]mergeRule, len(pairs))
	for i, p := range pairs {
		a, okA := m.vocab[p[0]]
		b, okB := m.vocab[p[1]]
		if !okA || !okB || len(p[1]) < len(m.prefix) {
			return &FieldError{Field: fmt.Sprintf("%s[%d]", path, i), Value: fmt.Sprintf("%q", p[0]+" "+p[1]), Reason: "a token of the merge is not in the vocabulary"}
		}
		id, ok := m.vocab[p[0]+p[1][len(m.prefix):]]
		if !ok {
			return &FieldError{Field: fmt.Sprintf("%s[%d]", path, i), Value: fmt.Sprintf("%q", p[0]+" "+p[1]), Reason: "the merged token is not in the vocabulary"}
		}
		m.merges[[2]uint32{a, b}] = mergeRule{rank: uint32(i), id: id}
	}
	return nil
}

// tokenize encodes one pre-token.
func (m *bpe) tokenize(text string) []uint32 {
	if text == "" {
		return nil
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[text]; ok {
			return []uint32{id}
		}
	}
	cacheable := len(text) < cacheMaxLen
	if cacheable {
		m.mu.RLock()
		ids, ok := m.cache[text]
		m.mu.RUnlock()
		if ok {
			return append([]uint32(nil), ids...)
		}
	}
	ids := m.mergeWord(text)
	if cacheable {
		m.mu.Lock()
		if len(m.cache) < cacheCapacity {
			m.cache[text] = append([]uint32(nil), ids...)
		}
		m.mu.Unlock()
	}
	return ids
}

// symbol is one symbol of a word being merged: a doubly linked list in a
// slice; size 0 marks one merged away.
type symbol struct {
	id         uint32
	prev, next int
	size       int
}

type word []symbol

func (w *word) add(id uint32, size int) {
	n := len(*w)
	*w = append(*w, symbol{id: id, prev: n - 1, next: -1, size: size})
	if n > 0 {
		(*w)[n-1].next = n
	}
}

// mergeWord is merge_word: the word's symbols, then merge_all.
func (m *bpe) mergeWord(text string) []uint32 {
	w := make(word, 0, len(text))
	var unk struct {
		pending bool
		size    int
	}
	for i, r := range text {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(text[i:])
		}
		s := text[i : i+size]
		if i > 0 {
			s = m.prefix + s
		}
		if i+size == len(text) {
			s += m.suffix
		}
		if id, ok := m.vocab[s]; ok {
			if unk.pending {
				w.add(m.unk, unk.size)
				unk.pending = false
			}
			w.add(id, size)
			continue
		}
		// As the Rust library, the bytes go in before a pending unk
		// token (its order, kept).
		if m.byteFallback && m.addBytes(&w, s) {
			continue
		}
		if !m.hasUnk {
			continue // dropped, as the Rust library does
		}
		if unk.pending && m.fuseUnk {
			unk.size += size
			continue
		}
		if unk.pending {
			w.add(m.unk, unk.size)
		}
		unk.pending, unk.size = true, size
	}
	if unk.pending {
		w.add(m.unk, unk.size)
	}
	return w.mergeAll(m.merges)
}

// addBytes adds s's byte tokens, if the vocabulary has all of them.
func (m *bpe) addBytes(w *word, s string) bool {
	for i := 0; i < len(s); i++ {
		if m.byteIDs[s[i]] < 0 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		w.add(uint32(m.byteIDs[s[i]]), 1)
	}
	return true
}

type pendingMerge struct {
	pos      int
	rank, id uint32
}

// mergeQueue is a min-heap by rank, then position.
type mergeQueue []pendingMerge

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(pendingMerge)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// mergeAll applies merges and returns the ids left, in order.
func (w word) mergeAll(merges map[[2]uint32]mergeRule) []uint32 {
	q := make(mergeQueue, 0, len(w))
	for i := 0; i+1 < len(w); i++ {
		if r, ok := merges[[2]uint32{w[i].id, w[i+1].id}]; ok {
			q = append(q, pendingMerge{pos: i, rank: r.rank, id: r.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(pendingMerge)
		cur := &w[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		next := cur.next
		right := w[next]
		if r, ok := merges[[2]uint32{cur.id, right.id}]; !ok || r.id != top.id {
			continue // expired: a side was merged since
		}
		cur.id, cur.size, cur.next = top.id, cur.size+right.size, right.next
		w[next].size = 0
		if right.next >= 0 {
			w[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if r, ok := merges[[2]uint32{w[cur.prev].id, cur.id}]; ok {
				heap.Push(&q, pendingMerge{pos: cur.prev, rank: r.rank, id: r.id})
			}
		}
		if cur.next >= 0 {
			if r, ok := merges[[2]uint32{cur.id, w[cur.next].id}]; ok {
				heap.Push(&q, pendingMerge{pos: top.pos, rank: r.rank, id: r.id})
			}
		}
	}
	ids := make([]uint32, 0, len(w))
	for _, s := range w {
		if s.size != 0 {
			ids = append(ids, s.id)
		}
	}
	return ids
}
