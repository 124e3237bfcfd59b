package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// refCase is a file, texts and the ids @lenml/tokenizers 3.7.2 gives
// (scripts: dump the files with VIGIL_TOKENIZER_DUMP=dir, then run the
// node script of the core's report over them).
type refCase struct {
	name  string
	doc   doc
	cases []encodeCase
}

func dumpRef(t *testing.T, c refCase) {
	dir := os.Getenv("VIGIL_TOKENIZER_DUMP")
	if dir == "" {
		return
	}
	var texts []string
	for _, e := range c.cases {
		texts = append(texts, e.text)
	}
	b, err := json.Marshal(map[string]any{"tokenizer": c.doc, "texts": texts})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, c.name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func runRef(t *testing.T, cases []refCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dumpRef(t, c)
			checkEncodes(t, mustLoad(t, c.doc, ""), false, c.cases)
		})
	}
}

func bpeRefCases() []refCase {
	ties := newDoc(vocabOf("a", "b", "c", "aa", "ab", "bc", "abc", "aaaa"), []string{"a a", "b c", "a b", "aa aa"})
	pairs := newDoc(vocabOf("a", "b", "c", "aa", "ab", "bc", "abc", "aaaa"), [][]string{{"a", "a"}, {"b", "c"}, {"a", "b"}, {"aa", "aa"}})
	ranks := newDoc(vocabOf("a", "b", "c", "ab", "bc", "abc"), []string{"#version: 0.2", "b c", "a b", "ab c"})

	// Byte fallback with some byte tokens only: a real "\t" and no
	// <0x09> (issue 24 item 5a), € by its bytes, é (no bytes) as unk.
	bytes := newDoc(vocabOf("<unk>", "\t", "x", " ", "<0xE2>", "<0x82>", "<0xAC>", "<0x78>"), []string{})
	bytes.model()["byte_fallback"] = true
	bytes.model()["unk_token"] = "<unk>"
	fused := newDoc(vocabOf("<unk>", "\t", "x", " ", "<0xE2>", "<0x82>", "<0xAC>"), []string{})
	fused.model()["byte_fallback"] = true
	fused.model()["unk_token"] = "<unk>"
	fused.model()["fuse_unk"] = true
	noUnk := newDoc(vocabOf("x", "y", "xy"), []string{"x y"})

	affix := newDoc(vocabOf("a", "##b", "##c", "ab", "c</w>", "##c</w>", "##b</w>", "abc</w>", "ab##c</w>"), []string{"a ##b", "ab ##c</w>"})
	affix.model()["continuing_subword_prefix"] = "##"
	affix.model()["end_of_word_suffix"] = "</w>"

	ignore := newDoc(vocabOf("a", "b", "c", "ab", "abc", "bc"), []string{"b c", "a b"})
	ignore.model()["ignore_merges"] = true

	// Where transformers.js differs, the Rust library's result is the
	// want: fuse_unk "é\n€é" (Rust: the byte tokens go in before the
	// pending unk; JS: [0 4 5 6 0]), no_unk "xzy" (Rust drops z and merges
	// x y; JS: [0 null 1]), affixes "abc" and "ab" (JS: null ids).
	return []refCase{
		{"ties", ties, []encodeCase{{"aaa", []uint32{3, 0}}, {"aaaaa", []uint32{7, 0}}, {"aaaaaa", []uint32{7, 3}}, {"abc", []uint32{0, 5}}, {"cab", []uint32{2, 4}}}},
		{"pairs", pairs, []encodeCase{{"aaa", []uint32{3, 0}}, {"aaaaa", []uint32{7, 0}}, {"abc", []uint32{0, 5}}}},
		{"ranks", ranks, []encodeCase{{"abc", []uint32{0, 4}}, {"abcabc", []uint32{0, 4, 0, 4}}}},
		{"byte_fallback", bytes, []encodeCase{{"\t", []uint32{1}}, {"x\t€", []uint32{2, 1, 4, 5, 6}}, {"é", []uint32{0}}, {"éé x", []uint32{0, 0, 3, 2}}, {"\n", []uint32{0}}}},
		{"fuse_unk", fused, []encodeCase{{"ééx", []uint32{0, 2}}, {"é\n€é", []uint32{4, 5, 6, 0}}}},
		{"no_unk", noUnk, []encodeCase{{"xzy", []uint32{2}}, {"xy", []uint32{2}}}},
		{"affixes", affix, []encodeCase{{"abc", []uint32{7}}, {"ab", []uint32{0, 6}}, {"c", []uint32{4}}}},
		{"ignore_merges", ignore, []encodeCase{{"abc", []uint32{4}}, {"abcb", []uint32{0, 5, 1}}}},
	}
}

func TestBPEMatchesReference(t *testing.T) { runRef(t, bpeRefCases()) }
