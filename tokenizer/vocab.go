package tokenizer

import (
	"hash/maphash"
	"math/bits"
)

// Own tables rather than Go maps for the two large parts a Tokenizer
// keeps: a map[string]uint32 costs a string header, an allocation per
// token and the map's overhead (about 50 bytes a token), and a
// map[[2]uint32]mergeRule about 40 bytes a merge; gemma3 has 262k tokens
// and 514k merges. These are one string arena with uint32 offsets and
// open-addressing (linear probing) tables of uint32 entries, about 13
// bytes a token plus its text, and 16-byte slots for merges.

// vocabTable is token → id: entry k is arena[off[k]:off[k+1]] with id
// ids[k]; slots hold k+1 (0: empty).
type vocabTable struct {
	arena string
	off   []uint32
	ids   []uint32
	slots []uint32
	seed  maphash.Seed
}

// vocabBuilder collects entries while model.vocab is scanned.
type vocabBuilder struct {
	v   *vocabTable
	buf []byte
}

// newVocabBuilder sizes for about n entries of at most textBytes in all.
func newVocabBuilder(n, textBytes int) *vocabBuilder {
	v := &vocabTable{seed: maphash.MakeSeed(), off: make([]uint32, 1, n+1), ids: make([]uint32, 0, n)}
	v.slots = make([]uint32, tableSize(n))
	return &vocabBuilder{v: v, buf: make([]byte, 0, textBytes)}
}

// tableSize is 4/3 of n: a load of at most 3/4. Not a power of two (that
// would be up to 8/3 of n); a hash is reduced to a slot by reduce.
func tableSize(n int) int {
	return n + n/3 + 1
}

// reduce maps a hash to [0, size) with the high half of its product
// (Lemire's multiply-shift, no division).
func reduce(h uint64, size int) int {
	hi, _ := bits.Mul64(h, uint64(size))
	return int(hi)
}

// next is the slot after i, wrapping.
func next(i, size int) int {
	if i++; i == size {
		return 0
	}
	return i
}

// set adds or (a repeated key, as a map) replaces tok's id.
func (b *vocabBuilder) set(tok string, id uint32) {
	v := b.v
	if 4*(len(v.ids)+1) > 3*len(v.slots) {
		b.rehash(2 * len(v.slots))
	}
	n := len(v.slots)
	for i := reduce(maphash.String(v.seed, tok), n); ; i = next(i, n) {
		k := v.slots[i]
		if k == 0 {
			b.buf = append(b.buf, tok...)
			v.off = append(v.off, uint32(len(b.buf)))
			v.ids = append(v.ids, id)
			v.slots[i] = uint32(len(v.ids))
			return
		}
		if string(b.buf[v.off[k-1]:v.off[k]]) == tok {
			v.ids[k-1] = id
			return
		}
	}
}

// rehash re-inserts the entries into size slots.
func (b *vocabBuilder) rehash(size int) {
	v := b.v
	v.slots = make([]uint32, size)
	for k := range v.ids {
		i := reduce(maphash.Bytes(v.seed, b.buf[v.off[k]:v.off[k+1]]), size)
		for v.slots[i] != 0 {
			i = next(i, size)
		}
		v.slots[i] = uint32(k + 1)
	}
}

// done returns the table, its slices trimmed to their length.
func (b *vocabBuilder) done() *vocabTable {
	v := b.v
	v.arena = string(b.buf)
	v.off = append([]uint32(nil), v.off...)
	v.ids = append([]uint32(nil), v.ids...)
	if size := tableSize(len(v.ids)); len(v.slots) > size {
		b.rehash(size) // the hint was high: sized to the entries
	}
	return v
}

// get is tok's id.
func (v *vocabTable) get(tok string) (uint32, bool) {
	n := len(v.slots)
	for i := reduce(maphash.String(v.seed, tok), n); ; i = next(i, n) {
		k := v.slots[i]
		if k == 0 {
			return 0, false
		}
		if v.arena[v.off[k-1]:v.off[k]] == tok {
			return v.ids[k-1], true
		}
	}
}

// len is the number of tokens.
func (v *vocabTable) len() int { return len(v.ids) }

// entry is entry k's token and id.
func (v *vocabTable) entry(k int) (string, uint32) {
	return v.arena[v.off[k]:v.off[k+1]], v.ids[k]
}

// mergeTable is (left id, right id) → mergeRule; a slot's rank is the
// merge's rank plus one (0: empty).
type mergeTable struct {
	slots []mergeSlot
}

type mergeSlot struct {
	key      uint64
	rank, id uint32
}

func newMergeTable(n int) *mergeTable {
	return &mergeTable{slots: make([]mergeSlot, tableSize(n))}
}

// index is the first slot to probe: the pair's Fibonacci hash, reduced.
func (t *mergeTable) index(key uint64) int {
	return reduce(key*0x9E3779B97F4A7C15, len(t.slots))
}

// set adds or (a repeated pair: the last rank, as the Rust library's map
// keeps) replaces a pair's rule.
func (t *mergeTable) set(a, b uint32, r mergeRule) {
	key := uint64(a)<<32 | uint64(b)
	n := len(t.slots)
	for i := t.index(key); ; i = next(i, n) {
		s := &t.slots[i]
		if s.rank == 0 || s.key == key {
			*s = mergeSlot{key: key, rank: r.rank + 1, id: r.id}
			return
		}
	}
}

// get is the rule of the pair (a, b).
func (t *mergeTable) get(a, b uint32) (mergeRule, bool) {
	key := uint64(a)<<32 | uint64(b)
	n := len(t.slots)
	for i := t.index(key); ; i = next(i, n) {
		s := &t.slots[i]
		if s.rank == 0 {
			return mergeRule{}, false
		}
		if s.key == key {
			return mergeRule{rank: s.rank - 1, id: s.id}, true
		}
	}
}
