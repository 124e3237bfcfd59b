package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jinjaCase is one template rendered for one user message. want is
// what python3's jinja2 (3.1.6) renders in transformers' environment
// (scripts/tokenizer-fixtures/render.py's), unless renderErr or loadErr
// is set: then Python raises, and vigil must fail the request or the
// template with an error holding Python's message. Each case is also in
// host/internal/jinja's corpus (unit/N), checked against Python there.
type jinjaCase struct {
	tmpl, content, want string
	renderErr, loadErr  string
}

var jinjaCases = []jinjaCase{
	// Python's str.strip() strips U+001C-U+001F.
	{tmpl: "{{ messages[0].content | trim }}", content: "\x1c hi \x1f", want: "hi"},
	{tmpl: "{{ messages[0].content | trim('h') }}", content: "hih", want: "i"},
	{tmpl: "{{ messages[0].content.strip() }}", content: "\x1chi\x1f", want: "hi"},
	{tmpl: "{{ messages[0].content.rstrip() }}", content: "hi\u00a0", want: "hi"},
	{tmpl: "{{ messages[0].content.strip() }}", content: " hi\n", want: "hi"},
	// jinja2.Undefined raises on attribute, item and arithmetic.
	{tmpl: "{{ x.y }}", renderErr: "'x' is undefined"},
	{tmpl: "{% if x.y is defined %}a{% endif %}", renderErr: "'x' is undefined"},
	{tmpl: "{% if x is defined and x.y %}a{% endif %}b", want: "b"},
	{tmpl: "{{ tools.attr }}|", want: "|"},
	{tmpl: "{{ tools.attr.b }}", renderErr: "'None' has no attribute 'attr'"},
	{tmpl: "{{ messages[0].tool_calls[0] }}", renderErr: "'dict object' has no attribute 'tool_calls'"},
	{tmpl: "{{ x + 1 }}", renderErr: "'x' is undefined"},
	{tmpl: "{{ -x }}", renderErr: "'x' is undefined"},
	{tmpl: "{% for t in tools %}x{% endfor %}", renderErr: "'NoneType' object is not iterable"},
	{tmpl: "{% for t in x %}x{% endfor %}y", want: "y"},
	// Unary minus and plus: Python applies a filter to -x, raises on a
	// non-number, and counts a bool as an int.
	{tmpl: "{{ -3|abs }}", want: "3"},
	{tmpl: "{{ - 3 | string }}", want: "-3"},
	{tmpl: "{{ +x is defined }}", renderErr: "'x' is undefined"},
	{tmpl: "{{ -1 is number }}", want: "True"},
	{tmpl: "{{ (-3)|abs }} {{ 0 - 3|abs }} {{ -true }} {{ -1.5 }} {{ -(1) }} {{ +2 }} {{ -2**2 }}", want: "3 -3 -1 -1.5 -1 2 4"},
	{tmpl: "{{ -'a' }}", renderErr: "bad operand type for unary -: 'str'"},
	{tmpl: "{{ -[1] }}", renderErr: "bad operand type for unary -: 'list'"},
	{tmpl: "{{ -none }}", renderErr: "bad operand type for unary -: 'NoneType'"},
	{tmpl: "{{ +{} }}", renderErr: "bad operand type for unary +: 'dict'"},
	{tmpl: "{{ -x }}", renderErr: "'x' is undefined"},
	// "%" formatting: the library gives 0.
	{tmpl: `{{ "%s" % 1 }}`, want: "1"},
	{tmpl: `{{ "%s" % x }}`, want: ""},
	{tmpl: `{{ 7 % 4 }} {{ -7 % 3 }} {{ -7 // 2 }} {{ 2 ** 3 }} {{ 10 / 4 }} {{ 'ab' * 2 }}`, want: "3 2 -4 8 2.5 abab"},
	// Python's operators and tests: 1 == 1.0 == True; mismatched types raise.
	{tmpl: "{{ 1 in [1.0] }} {{ 1 == true }} {{ 'a' in 'abc' }} {{ [1] + [2] }}", want: "True True True [1, 2]"},
	{tmpl: "{{ 'x' + 1 }}", renderErr: "can only concatenate str (not \"int\") to str"},
	{tmpl: "{{ none + 1 }}", renderErr: "unsupported operand type(s) for +: 'NoneType' and 'int'"},
	{tmpl: "{{ 1 / 0 }}", renderErr: "division by zero"},
	{tmpl: "{{ none < 1 }}", renderErr: "'<' not supported between instances of 'NoneType' and 'int'"},
	{tmpl: "{{ x is iterable }} {{ 'a' is sequence }} {{ {} is sequence }} {{ 1.0 is integer }} {{ true is number }}", want: "True True True False True"},
	{tmpl: "{{ 3.0 is odd }} {{ 7 is divisibleby(3) }} {{ 9 is divisibleby(3) }} {{ '123' is upper }} {{ 'AB1' is upper }}", want: "True False True False True"},
	// The library's filters that differ, rendered by vigil.
	{tmpl: "{{ 'abc' | first }} {{ 'abc' | last }} {{ [3, 1] | first }} {{ none | string }} {{ 'straße' | upper }}", want: "a c 3 None STRASSE"},
	{tmpl: "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.5 | round(0, 'floor') }} {{ 7 | round }} {{ (0 - 3) | abs }}", want: "2.0 4.0 2.57 2.0 7 3"},
	{tmpl: "{{ 'a' | indent }}", want: "a"},
	{tmpl: `{{ none | int }}|{{ " 4_2 " | int }}|{{ "4.7e1" | int }}|{{ "nan" | int }}|{{ "0b11" | int(base=2) }}|{{ "0x1A" | int(base=16) }}|{{ "z" | int(7) }}|{{ true | int }}|{{ [1] | int }}|{{ "-0x1a" | int(base=16) }}|{{ "1__0" | int }}|{{ "_1" | int }}|{{ 3.9 | int }}|{{ 1 - 3.9 | int }}|{{ "1e400" | int }}|{{ "inf" | int }}`,
		want: "0|42|47|0|3|26|7|1|0|-26|0|0|3|-2|0|0"},
	{tmpl: `{{ "hELLO wORLD" | capitalize }}|{{ "ǆa" | capitalize }}`, want: "Hello world|ǅa"},
	{tmpl: "{{ 'a b c'.split(' ', 1) }}", want: "['a', 'b c']"},
	{tmpl: "{{ 'abc'.endswith(('c', 'x')) }}", want: "True"},
	{tmpl: "{{ messages[0].content.upper() }}", content: "straße", want: "STRASSE"},
	{tmpl: "{{ messages[0].content.upper() }}", content: "stre", want: "STRE"},
	// Whitespace control reaches only the adjacent text (GLM's template).
	{tmpl: "{%- if true -%}<|s|>R E: {{ 'max' }}{%- endif -%}", want: "<|s|>R E: max"},
	{tmpl: "a \n  {% if true %}\n  b {{ 'c' }}\n {%- endif %}\n{# x #}  \n{{- 'd' -}}  e", want: "a \n  b cde"},
	// jinja2's immutable sandbox refuses list.append and the like.
	{tmpl: "{% set l = [] %}{% if false %}{{ l.append(1) }}{% endif %}{{ l }}", want: "[]"},
	{tmpl: "{% set l = [] %}{% set _ = l.append(1) %}{{ l }}", renderErr: "access to attribute 'append' of 'list' object is unsafe."},
	{tmpl: "{% for m in messages %}{{ loop.depth }}{% endfor %}", want: "1"},
	// transformers' tojson is json.dumps(ensure_ascii=False).
	{tmpl: "{{ {'role': 'user', 'content': messages[0].content} | tojson(indent=2) }}", content: "a<b&c>\u2028é\x01",
		want: "{\n  \"role\": \"user\",\n  \"content\": \"a<b&c>\u2028é\\u0001\"\n}"},
	{tmpl: "{{ messages | tojson }}", content: "a<b\"\\", want: `[{"role": "user", "content": "a<b\"\\"}]`},
	{tmpl: "{{ messages | tojson(ensure_ascii=True, sort_keys=True, separators=(',', ':')) }}", content: "é😀",
		want: `[{"content":"\u00e9\ud83d\ude00","role":"user"}]`},
	{tmpl: "{{ [1, [], {}, [2]] | tojson(indent='\t') }}", want: "[\n\t1,\n\t[],\n\t{},\n\t[\n\t\t2\n\t]\n]"},
	// Python prints dicts in insertion order, None as None, floats and
	// strings inside containers as repr.
	{tmpl: "{{ messages[0] }}", content: "it's", want: `{'role': 'user', 'content': "it's"}`},
	{tmpl: "{{ [1, messages[0].content, none, true, 1.5] }}", content: "a'b\"\n\u00a0é", want: `[1, 'a\'b"\n\xa0é', None, True, 1.5]`},
	{tmpl: "{{ tools }}", want: "None"},
	{tmpl: "{{ 0.1 + 0.2 }} {{ 2.0 }} {{ 1 / 2 }}", want: "0.30000000000000004 2.0 0.5"},
	{tmpl: "{{ 'x' ~ none ~ 1.0 }}", want: "xNone1.0"},
	// jinja2's filters the library lacks, and those jinja2 lacks.
	{tmpl: "{{ messages[0].content | truncate(10) }}", content: "abcdefghijklmnopqrstuvwxyz", want: "abcdefg..."},
	{tmpl: "{{ messages[0].content | truncate(12) }}", content: "hello world foo bar baz", want: "hello..."},
	{tmpl: "{{ messages[0].content | truncate(12, true, '..', 0) }}", content: "hello world foo bar baz", want: "hello worl.."},
	{tmpl: "{{ messages[0].content | truncate(12) }}", content: "hello world foo", want: "hello world foo"},
	{tmpl: "{{ '%s-%d %%' | format(messages[0].content, 3) }}", content: "hi", want: "hi-3 %"},
	{tmpl: "{{ '%s' | format(none) }}", want: "None"},
	{tmpl: "{{ messages[0].content | format(1) }}", content: "%x", want: "1"},
	{tmpl: "{{ 'a' is escaped }}", want: "False"},
	{tmpl: "{{ messages[0].content | fromjson }}", loadErr: "No filter named 'fromjson'."},
	{tmpl: "{{ messages[0].content | title }}", want: "Hi"},
	{tmpl: "{{ messages[0].content.title() }}", want: "Hi"},
	{tmpl: "{{ ['a', 'b'] | map('upper') | list }} {{ messages | map(attribute='role') | join(',') }} {{ messages | map(attribute='x', default='d') | list }}", want: "['A', 'B'] user ['d']"},
	{tmpl: "{{ ['a'] | map('center') | list }}", want: "['                                       a                                        ']"},
	{tmpl: "{% filter upper %}x{% endfilter %}", want: "X"},
	{tmpl: "{{ dict(b=1, a=2) }}", want: "{'b': 1, 'a': 2}"},
	{tmpl: "{{ dict(b=1) }}", want: "{'b': 1}"},
}

func TestChatTemplateMatchesPythonJinja(t *testing.T) {
	dir := modelDir(t, map[string]string{
		TokenizerFile:       string(tinyTokenizer(t, "BPE")),
		TokenizerConfigFile: `{"bos_token": "<s>"}`,
	})
	file := filepath.Join(t.TempDir(), "chat.jinja")
	for _, c := range jinjaCases {
		if err := os.WriteFile(file, []byte(c.tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := Load(dir, file)
		if c.loadErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.loadErr) {
				t.Errorf("%s: Load err = %v, want one naming %q", c.tmpl, err, c.loadErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		content := c.content
		if content == "" {
			content = "hi"
		}
		got, err := tok.RenderChat([]Message{{Role: "user", Content: content}}, true)
		switch {
		case c.renderErr != "" && (err == nil || !strings.Contains(err.Error(), c.renderErr)):
			t.Errorf("%s [%q]: RenderChat = %q, %v; want an error holding %q", c.tmpl, content, got, err, c.renderErr)
		case c.renderErr == "" && (err != nil || got != c.want):
			t.Errorf("%s [%q]: RenderChat = %q, %v; want %q", c.tmpl, content, got, err, c.want)
		}
	}
}
