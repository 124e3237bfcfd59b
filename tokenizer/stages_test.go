package tokenizer

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// texts of pieces, for comparing.
func texts(ps []piece) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.text)
	}
	return out
}

// preTokenizeText runs p on one segment that starts the input.
func preTokenizeText(p preTokenizer, s string) []string {
	return texts(p.preTokenize([]piece{{text: s, first: true}}))
}

// rustOverrides are the values where transformers.js differs from the
// Rust library, which the package follows: case name → text index → value.
var rustOverrides = map[string]map[int]any{
	// JavaScript lowercases the whole string (final sigma: ΟΔΟΣ → οδος);
	// Rust's char::to_lowercase, character by character, has no
	// final-sigma rule. (Both map İ to i and U+0307.)
	"Lowercase": {12: "οδοσ i\u0307stanbul ß"},
	// Rust's Prepend leaves an empty segment empty.
	"PrependReplace": {14: ""},
	// Rust drops empty pieces.
	"ByteLevelNoRegex": {14: []string{}},
	// transformers.js's \w is ASCII; the regex crate's is Unicode
	// (Alphabetic, M, Nd, Pc, Join_Control: ZWJ and U+FE0F are word
	// characters, emoji are not).
	"Whitespace": {
		3:  []string{"你好", "，", "世界", "！", "这是测试", "。"},
		6:  []string{"👨", "\u200d", "👩", "\u200d", "👧", "\u200d", "👦", "👍🏽", "🏳", "\ufe0f\u200d", "🌈"},
		7:  []string{"e\u0301", "é", "ñ", "n\u0303", "Å"},
		8:  []string{"ﬁnance", "ﬀ", "²", "㎏", "Ⅻ", "①"},
		12: []string{"ΟΔΟΣ", "İstanbul", "ß"},
		13: []string{"x", "\x00", "ﬁ", "\x00", "y"},
	},
	// transformers.js's \d is ASCII; Rust's char::is_numeric is N*
	// (² is No, Ⅻ Nl, ① No).
	"Digits":           {8: []string{"ﬁnance ﬀ ", "²", " ㎏ ", "Ⅻ", " ", "①"}},
	"DigitsIndividual": {8: []string{"ﬁnance ﬀ ", "²", " ㎏ ", "Ⅻ", " ", "①"}},
	// transformers.js groups runs of punctuation; Rust's Isolated gives
	// each punctuation character alone.
	"Punctuation": {
		0:  []string{"def f", "(", "x", ")", ":", "\n\tif x", ":", "\n\t\treturn 1\n    else", ":", "\n        return  2\n"},
		9:  []string{"<", "|", "endoftext", "|", ">", " ", "<", "s", ">", " ", "[", "INST", "]", " ", "<", "/", "s", ">"},
		15: []string{"hello", "_", "world foo", "-", "bar baz", ".", "qux", "!", "?", " ", "$", "100 ", "~", "user", "^", "2"},
	},
}

func TestStagesMatchReference(t *testing.T) {
	for _, c := range referenceCases {
		t.Run(c.name, func(t *testing.T) {
			if c.normalized != nil {
				n, err := buildNormalizer(json.RawMessage(c.stage), "normalizer")
				if err != nil {
					t.Fatal(err)
				}
				for i, in := range referenceTexts {
					want := any(c.normalized[i])
					if o, ok := rustOverrides[c.name][i]; ok {
						want = o
					}
					if got := n.normalize(in); got != want {
						t.Errorf("%q: got %q, want %q", in, got, want)
					}
				}
				return
			}
			p, err := buildPreTokenizer(json.RawMessage(c.stage), "pre_tokenizer")
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range referenceTexts {
				want := any(c.pieces[i])
				if o, ok := rustOverrides[c.name][i]; ok {
					want = o
				}
				if got := preTokenizeText(p, in); !reflect.DeepEqual(got, want) {
					t.Errorf("%q:\n got %q\nwant %q", in, got, want)
				}
			}
		})
	}
}

func mustPre(t testing.TB, stage string) preTokenizer {
	t.Helper()
	p, err := buildPreTokenizer(json.RawMessage(stage), "pre_tokenizer")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The Rust library's split.rs tests: the whitespace regex inverted, each
// behavior.
func TestSplitBehaviorsAsRust(t *testing.T) {
	want := map[string][]string{
		"Removed":            {"How", "are", "you", "doing", "?"},
		"Isolated":           {"How", " ", "are", " ", "you", " ", "doing", "?"},
		"MergedWithPrevious": {"How ", "are ", "you ", "doing", "?"},
		"MergedWithNext":     {"How", " are", " you", " doing", "?"},
		"Contiguous":         {"How", " ", "are", " ", "you", " ", "doing?"},
	}
	for b, w := range want {
		p := mustPre(t, `{"type":"Split","pattern":{"Regex":"\\w+|[^\\w\\s]+"},"behavior":"`+b+`","invert":true}`)
		if got := preTokenizeText(p, "How are you doing?"); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: got %q, want %q", b, got, w)
		}
	}
	// normalizer.rs's doc: splitting on '-' in "the-final--countdown".
	dash := map[string][]string{
		"Removed":            {"the", "final", "countdown"},
		"Isolated":           {"the", "-", "final", "-", "-", "countdown"},
		"MergedWithPrevious": {"the-", "final-", "-", "countdown"},
		"MergedWithNext":     {"the", "-final", "-", "-countdown"},
		"Contiguous":         {"the", "-", "final", "--", "countdown"},
	}
	for b, w := range dash {
		p := mustPre(t, `{"type":"Split","pattern":{"String":"-"},"behavior":"`+b+`","invert":false}`)
		if got := preTokenizeText(p, "the-final--countdown"); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: got %q, want %q", b, got, w)
		}
	}
}

// Issue 24 item 1: the gpt4o file's inverted Split (behavior Removed)
// keeps the pattern's matches; nothing is lost.
func TestSplitInvertedGPT4o(t *testing.T) {
	var gpt string
	for _, c := range referenceCases {
		if c.name == "GPT4o" {
			gpt = c.stage
		}
	}
	p := mustPre(t, gpt)
	got := preTokenizeText(p, "Hello world!\n\n  x = 12345")
	want := []string{"Hello", "Ġworld", "!ĊĊ", "Ġ", "Ġx", "Ġ=", "Ġ", "123", "45"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Issue 24 item 2, and the Rust library's metaspace.rs tests.
func TestMetaspace(t *testing.T) {
	cases := []struct {
		stage string
		in    []piece
		want  []string
	}{
		// Only U+0020 becomes ▁: a newline or tab stays (the reference
		// gives ▁Hi <0x0A> Hi).
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, []piece{{"Hi\nHi\tthere", true}}, []string{"▁Hi\nHi\tthere"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, []piece{{"Hey   friend!", true}}, []string{"▁Hey", "▁", "▁", "▁friend!"}},
		// split false: indentation stays one piece, so ▁▁ merges can form.
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`, []piece{{"def f():\n    return 1", true}}, []string{"▁def▁f():\n▁▁▁▁return▁1"}},
		// first: only a segment at the input's start gains ▁ ([/INST]Hi).
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`, []piece{{"Hi", false}}, []string{"Hi"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`, []piece{{"Hey my friend ", true}, {"how▁are you", false}}, []string{"▁Hey", "▁my", "▁friend", "▁", "how", "▁are", "▁you"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`, []piece{{"a b", true}}, []string{"a", "▁b"}},
		// legacy files: add_prefix_space true and no scheme is always.
		{`{"type":"Metaspace","replacement":"_","add_prefix_space":true}`, []piece{{"a b", false}}, []string{"_a", "_b"}},
		{`{"type":"Metaspace","replacement":"▁","add_prefix_space":false,"prepend_scheme":"never"}`, []piece{{" a", true}}, []string{"▁a"}},
	}
	for _, c := range cases {
		p := mustPre(t, c.stage)
		if got := texts(p.preTokenize(c.in)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s on %+v: got %q, want %q", c.stage, c.in, got, c.want)
		}
	}
}

// The Rust library's metaspace test: after a Split isolating <s>, first
// applies to the first piece only.
func TestMetaspaceFirstAfterSplit(t *testing.T) {
	p := mustPre(t, `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":"<s>"},"behavior":"Isolated","invert":false},{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}]}`)
	got := preTokenizeText(p, " Hey <s>how <s>are <s> you")
	want := []string{"▁Hey▁", "<s>", "how▁", "<s>", "are▁", "<s>", "▁you"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Bad or unsupported fields are a *FieldError naming the JSON path.
func TestStageFieldErrors(t *testing.T) {
	cases := []struct{ stage, field string }{
		{`{"type":"Split","pattern":{"Regex":"("},"behavior":"Isolated","invert":false}`, "pre_tokenizer.pattern.Regex"},
		{`{"type":"Split","pattern":{"Regex":"a"},"behavior":"Merged","invert":false}`, "pre_tokenizer.behavior"},
		{`{"type":"Split","pattern":{"Regex":"a"},"behavior":"Isolated"}`, "pre_tokenizer.invert"},
		{`{"type":"Split","pattern":{},"behavior":"Isolated","invert":false}`, "pre_tokenizer.pattern"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"}`, "pre_tokenizer.prepend_scheme"},
		{`{"type":"Metaspace","replacement":"▁","add_prefix_space":false}`, "pre_tokenizer.add_prefix_space"},
		{`{"type":"Metaspace","replacement":"ab"}`, "pre_tokenizer.replacement"},
		{`{"type":"ByteLevel","trim_offsets":true}`, "pre_tokenizer.add_prefix_space"},
		{`{"type":"Digits"}`, "pre_tokenizer.individual_digits"},
		{`{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"UnicodeScripts"}]}`, "pre_tokenizer.pretokenizers[1].type"},
		{`{"type":"BertPreTokenizer"}`, "pre_tokenizer.type"},
	}
	for _, c := range cases {
		_, err := buildPreTokenizer(json.RawMessage(c.stage), "pre_tokenizer")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v, want a FieldError on %s", c.stage, err, c.field)
		}
	}
	norms := []struct{ stage, field string }{
		{`{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Precompiled","precompiled_charsmap":"AAAA"}]}`, "normalizer.normalizers[1].type"},
		{`{"type":"BertNormalizer","clean_text":true}`, "normalizer.type"},
		{`{"type":"Replace","pattern":{"String":"a"}}`, "normalizer.content"},
		{`{"type":"Strip","strip_left":true}`, "normalizer.strip_right"},
		{`{"type":"Prepend"}`, "normalizer.prepend"},
		{`{"type":"Sequence"}`, "normalizer.normalizers"},
	}
	for _, c := range norms {
		_, err := buildNormalizer(json.RawMessage(c.stage), "normalizer")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v, want a FieldError on %s", c.stage, err, c.field)
		}
	}
}

// Issue 24 item 4: forms that change length, at a segment's start and
// before NUL, neither duplicate nor cut.
func TestNormalizersThatChangeLength(t *testing.T) {
	cases := []struct{ typ, in, want string }{
		{"NFKC", "ﬁnance", "finance"},
		{"NFKC", "ﬁ\x00ﬁ\x00", "fi\x00fi\x00"},
		{"NFKD", "ﬃ\x00é", "ffi\x00e\u0301"},
		{"NFD", "é\x00", "e\u0301\x00"},
		{"NFC", "e\u0301\x00", "é\x00"},
		{"NFKC", "", ""},
	}
	for _, c := range cases {
		n, err := buildNormalizer(json.RawMessage(`{"type":"`+c.typ+`"}`), "normalizer")
		if err != nil {
			t.Fatal(err)
		}
		if got := n.normalize(c.in); got != c.want {
			t.Errorf("%s(%q) = %q, want %q", c.typ, c.in, got, c.want)
		}
	}
}

// The Rust library's strip.rs tests: NFKD then StripAccents then
// Lowercase (Vietnamese, Thai).
func TestStripAccentsAsRust(t *testing.T) {
	n, err := buildNormalizer(json.RawMessage(`{"type":"Sequence","normalizers":[{"type":"NFKD"},{"type":"StripAccents"},{"type":"Lowercase"}]}`), "normalizer")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"ậ…": "a...", "ำน\u0e49ำ3ลำ": "านา3ลา", "e\u0304\u0304\u0304o": "eo", "这很简单": "这很简单"} {
		if got := n.normalize(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	_ = strings.Repeat
}

// The forms as the Rust library's (Unicode 9.0, no Stream-Safe limit):
// Go's norm alone fails each of these.
func TestUnicodeFormsAsRust(t *testing.T) {
	acute, grave := "\u0301", "\u0316" // classes 230, 220
	cases := []struct{ typ, in, want string }{
		// 35 marks: no U+034F after the 30th.
		{"NFC", "e" + strings.Repeat(acute, 35), "é" + strings.Repeat(acute, 34)},
		{"NFD", "é" + strings.Repeat(acute, 35), "e" + strings.Repeat(acute, 36)},
		// 40 marks reordered as one run, then the first 230 composes.
		{"NFC", "a" + strings.Repeat(acute+grave, 20), "á" + strings.Repeat(grave, 20) + strings.Repeat(acute, 19)},
		{"NFKD", "ﬁ" + strings.Repeat(acute+grave, 20), "fi" + strings.Repeat(grave, 20) + strings.Repeat(acute, 20)},
		// Unicode 13's segmented digit and 12's ㋿ are unassigned in 9.0.
		{"NFKC", "\U0001FBF5 ㋿ ①", "\U0001FBF5 ㋿ 1"},
		// Unicode 14's Arabic mark U+0898 (class 230 now) is a starter in
		// 9.0: the marks around it are not reordered across it.
		{"NFD", "a\u0898\u0316", "a\u0898\u0316"},
		{"NFC", "a\u0898" + acute, "a\u0898" + acute},
	}
	for _, c := range cases {
		n, err := buildNormalizer(json.RawMessage(`{"type":"`+c.typ+`"}`), "normalizer")
		if err != nil {
			t.Fatal(err)
		}
		if got := n.normalize(c.in); got != c.want {
			t.Errorf("%s(%+q) = %+q, want %+q", c.typ, c.in, got, c.want)
		}
	}
	sa, _ := buildNormalizer(json.RawMessage(`{"type":"StripAccents"}`), "normalizer")
	if got := sa.normalize("a\u0301\u1ac1b"); got != "a\u1ac1b" {
		t.Errorf("StripAccents kept %+q; a mark new since 9.0 (U+1AC1) stays, U+0301 goes", got)
	}
}

// An empty String pattern is the Rust library's empty regex: a match at
// every character boundary.
func TestEmptyStringPattern(t *testing.T) {
	r, err := buildNormalizer(json.RawMessage(`{"type":"Replace","pattern":{"String":""},"content":"-"}`), "normalizer")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.normalize("ab"); got != "-a-b-" {
		t.Errorf("got %q, want -a-b-", got)
	}
	p := mustPre(t, `{"type":"Split","pattern":{"String":""},"behavior":"Isolated","invert":false}`)
	if got := preTokenizeText(p, "héé"); !reflect.DeepEqual(got, []string{"h", "é", "é"}) {
		t.Errorf("got %q", got)
	}
}

// The Rust library's whitespace.rs, digits.rs and punctuation.rs tests.
func TestSimplePreTokenizersAsRust(t *testing.T) {
	cases := []struct {
		stage, in string
		want      []string
	}{
		{`{"type":"Whitespace"}`, "Hey man!", []string{"Hey", "man", "!"}},
		{`{"type":"Whitespace"}`, "How are you doing?", []string{"How", "are", "you", "doing", "?"}},
		{`{"type":"Whitespace"}`, "\n", []string{}},
		{`{"type":"WhitespaceSplit"}`, "Hey man!", []string{"Hey", "man!"}},
		{`{"type":"WhitespaceSplit"}`, "Hey, man, Good?", []string{"Hey,", "man,", "Good?"}},
		{`{"type":"Digits","individual_digits":false}`, "Hey 123 friend!", []string{"Hey ", "123", " friend!"}},
		{`{"type":"Digits","individual_digits":true}`, "Hey 123 friend!", []string{"Hey ", "1", "2", "3", " friend!"}},
		{`{"type":"Punctuation"}`, "Hey friend!     How are you?!?", []string{"Hey friend", "!", "     How are you", "?", "!", "?"}},
	}
	for _, c := range cases {
		if got := preTokenizeText(mustPre(t, c.stage), c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s on %q: got %q, want %q", c.stage, c.in, got, c.want)
		}
	}
}
