package tokenizer

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// FuzzScan: the scanner reads vocabularies and merges as encoding/json
// does: the same values, and an error where it gives one.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "b\u00e9": 2, "\ud83d\ude00": 3}`, `{"\ud83d": 1, "\ude00x": 2, "\ud83d\u0041": 3}`,
		`{"\"\\\/\b\f\n\r\t": 0}`, `{"a":4294967295}`, `{"a":4294967296}`, `{"a":-1}`, `{"a":1.0}`,
		`{"a":01}`, `{"a":1e3}`, "{\"\xff\xfe\":1}", `{"a":1,}`, `{}`, `null`, `{"a" 1}`, "{\"a\x01\":1}",
		`[["a","b"],["c d","e"]]`, `[["a"],null,["a","b","c"]]`, `["a b","#version: 0.2",null]`, `[]`,
		`[["a","b"],"c d"]`, `["a\u0020b", "\u00"]`, `[ "a b" , "c d" ] `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]uint32
		werr := json.Unmarshal(data, &want)
		got, gerr := scanVocab(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && (!maps.Equal(got, want) || (got == nil) != (want == nil))) {
			t.Fatalf("vocab %q: scan = %v, %v; encoding/json = %v, %v", data, got, gerr, want, werr)
		}
		var wantLines []string
		werr = json.Unmarshal(data, &wantLines)
		lines, gerr := scanLines(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !slices.Equal(lines, wantLines)) {
			t.Fatalf("lines %q: scan = %q, %v; encoding/json = %q, %v", data, lines, gerr, wantLines, werr)
		}
		var wantPairs [][]string
		werr = json.Unmarshal(data, &wantPairs)
		pairs, gerr := scanPairs(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !slices.EqualFunc(pairs, wantPairs, slices.Equal)) {
			t.Fatalf("pairs %q: scan = %q, %v; encoding/json = %q, %v", data, pairs, gerr, wantPairs, werr)
		}
	})
}
