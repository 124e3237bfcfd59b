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

// tableSize is a power of two at least 4/3 of n: a load of at most 3/4.
func tableSize(n int) int {
	return 1 << bits.Len(uint(n+n/3+1))
}

// set adds or (a repeated key, as a map) replaces tok's id.
func (b *vocabBuilder) set(tok string, id uint32) {
	v := b.v
	if 4*(len(v.ids)+1) > 3*len(v.slots) {
		b.rehash(2 * len(v.slots))
	}
	mask := uint64(len(v.slots) - 1)
	for i := maphash.String(v.seed, tok) & mask; ; i = (i + 1) & mask {
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
	mask := uint64(len(v.slots) - 1)
	for k := range v.ids {
		i := maphash.Bytes(v.seed, b.buf[v.off[k]:v.off[k+1]]) & mask
		for v.slots[i] != 0 {
			i = (i + 1) & mask
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
	mask := uint64(len(v.slots) - 1)
	for i := maphash.String(v.seed, tok) & mask; ; i = (i + 1) & mask {
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
	shift uint
}

type mergeSlot struct {
	key      uint64
	rank, id uint32
}

func newMergeTable(n int) *mergeTable {
	size := tableSize(n)
	return &mergeTable{slots: make([]mergeSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

// index is the first slot to probe: Fibonacci hashing of the pair.
func (t *mergeTable) index(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// set adds or (a repeated pair: the last rank, as the Rust library's map
// keeps) replaces a pair's rule.
func (t *mergeTable) set(a, b uint32, r mergeRule) {
	key := uint64(a)<<32 | uint64(b)
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
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
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.rank == 0 {
			return mergeRule{}, false
		}
		if s.key == key {
			return mergeRule{rank: s.rank - 1, id: s.id}, true
		}
	}
}
