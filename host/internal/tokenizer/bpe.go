package tokenizer

// The BPE merge of one pre-token, over the library's vocabulary and merge
// ranks. The library's own (bpe.Word) rebuilds its symbol list for every
// character added, which takes minutes on a 20,000-character pre-token (a
// prompt of spaces), and breaks ties between equal-rank merges by heap
// order where the Rust library merges the leftmost first ("aaa" is
// "aa"+"a"), so runs of a repeated character tokenized differently. This
// follows the Rust library's merge_word and merge_all without dropout:
// characters (or, missing from the vocabulary, their <0xNN> byte tokens
// with byte_fallback, else unk_token, fused with fuse_unk) are merged
// lowest rank first, leftmost first among equals.

import (
	"container/heap"
	"fmt"
	"sync"
	"unicode/utf8"

	sm "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model/bpe"
)

// hfBPE is the model the pipeline runs: the library's vocabulary and
// merges with Hugging Face's merge, byte_fallback and ignore_merges.
type hfBPE struct {
	*bpe.BPE
	unk          int // -1: none
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix

	cache sync.Map // pre-token -> []sm.Token, for short pre-tokens
	size  int64    // entries in cache (approximate)
	mu    sync.Mutex
}

// maxCached bounds the cache of merged pre-tokens, as the Rust library's
// 10,000-entry cache does; pre-tokens longer than cacheMaxLen are not kept.
const (
	maxCached   = 10000
	cacheMaxLen = 256
)

type symbol struct {
	id         int
	prev, next int // indexes into the symbols; -1: none
	start, end int // byte offsets in the pre-token; start == end: merged away
}

type merge struct{ pos, rank, newID int }

type mergeHeap []merge

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(merge)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Tokenize implements the library's Model for one pre-token.
func (m *hfBPE) Tokenize(seq string) ([]sm.Token, error) {
	if seq == "" {
		return nil, nil
	}
	vocab := *m.Vocab
	if m.ignoreMerges {
		if id, ok := vocab[seq]; ok {
			return []sm.Token{{Id: id, Value: seq, Offsets: []int{0, len(seq)}}}, nil
		}
	}
	if len(seq) <= cacheMaxLen {
		if v, ok := m.cache.Load(seq); ok {
			return cloneTokens(v.([]sm.Token)), nil
		}
	}
	toks, err := m.mergeWord(seq)
	if err != nil {
		return nil, err
	}
	if len(seq) <= cacheMaxLen {
		m.mu.Lock()
		if m.size >= maxCached {
			m.cache.Clear()
			m.size = 0
		}
		m.size++
		m.mu.Unlock()
		m.cache.Store(seq, cloneTokens(toks))
	}
	return toks, nil
}

func cloneTokens(t []sm.Token) []sm.Token {
	out := make([]sm.Token, len(t))
	for i, tok := range t {
		out[i] = sm.Token{Id: tok.Id, Value: tok.Value, Offsets: []int{tok.Offsets[0], tok.Offsets[1]}}
	}
	return out
}

// mergeWord is Tokenize's merge of seq, uncached.
func (m *hfBPE) mergeWord(seq string) ([]sm.Token, error) {
	syms := m.symbols(seq)
	mergeSymbols(syms, *m.Merges)
	vocabR := *m.VocabR
	var out []sm.Token
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		s := syms[i]
		if s.start == s.end {
			return nil, fmt.Errorf("bpe: symbol %d merged away but still linked", i)
		}
		out = append(out, sm.Token{Id: s.id, Value: vocabR[s.id], Offsets: []int{s.start, s.end}})
	}
	return out, nil
}

// symbols is seq before any merge, a linked list of its characters (with
// the continuing prefix and the end-of-word suffix) or, those missing from
// the vocabulary, their byte tokens with byte_fallback, else unk_token.
func (m *hfBPE) symbols(seq string) []symbol {
	vocab := *m.Vocab
	syms := make([]symbol, 0, len(seq))
	add := func(id, start, end int) {
		n := len(syms)
		syms = append(syms, symbol{id: id, prev: n - 1, next: -1, start: start, end: end})
		if n > 0 {
			syms[n-1].next = n
		}
	}
	lastUnk := false
	for i, r := range seq {
		end := i + utf8.RuneLen(r)
		if r == utf8.RuneError && end > len(seq) {
			end = i + 1
		}
		s := seq[i:end]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if end == len(seq) && m.suffix != "" {
			s += m.suffix
		}
		if id, ok := vocab[s]; ok {
			add(id, i, end)
			lastUnk = false
			continue
		}
		if m.byteFallback {
			for j := i; j < end; j++ {
				add(m.byteIDs[seq[j]], j, j+1)
			}
			lastUnk = false
			continue
		}
		if m.unk < 0 {
			continue // the Rust library drops it too
		}
		if m.fuseUnk && lastUnk {
			syms[len(syms)-1].end = end
			continue
		}
		add(m.unk, i, end)
		lastUnk = true
	}
	return syms
}

// mergeSymbols applies merges to syms in place, lowest rank first and
// leftmost first among equals; a merged-away symbol is left empty and
// unlinked.
func mergeSymbols(syms []symbol, merges bpe.Merges) {
	h := make(mergeHeap, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := merges[bpe.Pair{C1: syms[i].id, C2: syms[i+1].id}]; ok {
			h = append(h, merge{pos: i, rank: v.Rank, newID: v.NewId})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		top := heap.Pop(&h).(merge)
		cur := &syms[top.pos]
		if cur.start == cur.end || cur.next < 0 {
			continue
		}
		right := &syms[cur.next]
		if v, ok := merges[bpe.Pair{C1: cur.id, C2: right.id}]; !ok || v.NewId != top.newID {
			continue // expired: one side was merged since
		}
		cur.id, cur.end = top.newID, right.end
		right.start = right.end // merged away
		cur.next = right.next
		if cur.next >= 0 {
			syms[cur.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := merges[bpe.Pair{C1: syms[cur.prev].id, C2: cur.id}]; ok {
				heap.Push(&h, merge{pos: cur.prev, rank: v.Rank, newID: v.NewId})
			}
		}
		if cur.next >= 0 {
			if v, ok := merges[bpe.Pair{C1: cur.id, C2: syms[cur.next].id}]; ok {
				heap.Push(&h, merge{pos: top.pos, rank: v.Rank, newID: v.NewId})
			}
		}
	}
}
