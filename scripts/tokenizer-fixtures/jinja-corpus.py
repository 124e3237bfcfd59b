"""Build host/internal/jinja/testdata/corpus.json: each case's template and
context rendered by python3's jinja2 in transformers' chat-template
environment (as render.py sets it up), or the exception it raised (type and
message). host/internal/jinja's corpus test requires vigil's engine to give
the same text, or to fail where Python fails.

Run: python3 scripts/tokenizer-fixtures/jinja-corpus.py (pyenv's python3 with
jinja2 3.1.x; the file records the version).
"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "host/internal/jinja/testdata/corpus.json")
MODELS = os.path.join(ROOT, "host/internal/tokenizer/testdata/models")


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


CTX = {
    "s": "Hello World", "n": 7, "f": 2.5, "neg": -3, "t": True, "z": None, "e": "",
    "xs": [3, 1, 2], "words": ["b", "A", "c", "a"], "d": {"b": 1, "a": 2, "c": None},
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    "nested": {"k": [1, {"x": "y"}], "u": "é\u2028<>&\"'\\\n\t\x01"},
    "ws": " \t\x1c\x1d\x1e\x1fpad\x1f\x85 ", "big": 9223372036854775807, "fl": [1.0, 0.1, 1e16, 1e-5, -0.0],
}

EXPRS = r"""
1 + 2;; -3|abs;; -2**2;; 2**3**2;; 2**-1;; 7 // 2;; -7 // 2;; 7 % 3;; -7 % 3;; 7 / 2;; 6 / 2;; 1 / 0;; 1 // 0;; 1 % 0;; 2 ** 0.5
1.5 + 1;; 0.1 + 0.2;; 1e16;; 1e-5;; 1e300 * 1e300;; -0.0;; 3.0;; 10 / 3;; 2 ** 63;; big + 1;; big * 2;; -big - 2;; -(big) - 1
'a' + 'b';; 'a' ~ 1 ~ none;; 'ab' * 3;; 3 * 'ab';; [1] + [2];; [1] * 2;; (1,) + (2,);; 'a' + 1;; 1 + none;; [1] + (2,)
'a' * -1;; '%s' % 1;; '%s' % none;; '%s and %s' % (1, 2);; '%d' % 3.7;; '%5.2f' % 3.14159;; '%x' % 255;; '%r' % 'q'
'%(a)s' % d;; '%s' % (1, 2);; '%d' % 'x';; '%' % 1;; '%-5s|' % 'a';; '%05d' % -42;; '%e' % 12345.678;; '%g' % 0.00001
'%i' % True;; '%s %%' % 5;; '%c' % 65;; '%o' % 8;; '%+d' % 5;; '%.3s' % 'abcdef';; '%s' % [1, 'a'];; '%s' % {'a': 1}
1 < 2;; 1 < 2 < 3;; 3 > 2 > 1 > 0;; 1 == 1.0;; 'a' < 'b';; [1, 2] < [1, 3];; 1 < 'a';; none < 1;; (1, 2) == (1, 2)
1 in [1, 2];; 'a' in 'cat';; 'x' not in d;; 'a' in d;; 1 in 'abc';; none in [none];; [1] == [1];; {'a': 1} == {'a': 1}
not 1;; not none;; 1 and 2;; 0 and 2;; 0 or 'x';; '' or none;; none or 0;; t and 'yes' or 'no';; not xs
'yes' if t else 'no';; 'yes' if z;; ('yes' if z) ~ 'x';; 1 if 0 else 2 if 0 else 3
s;; n;; f;; neg;; t;; z;; e;; xs;; words;; d;; msgs;; nested;; fl;; big;; (1,);; (1, 'a');; ();; [];; {};; {'a': (1, 2)};; {1: 'x', 1.0: 'y', true: 'z'}
'it\'s';; "say \"hi\"";; 'both \' and "';; '\n\t\\';; '\x00\x7f\u00ad\u200b';; 'é€𝄞';; "\u2028";; '\u001c'
undefined_var;; undefined_var.attr;; undefined_var['k'];; none.attr;; none.attr.more;; none['k'];; d.missing;; d.missing.deeper
xs[0];; xs[-1];; xs[5];; xs[1:];; xs[::-1];; xs[::2];; xs[:-1];; s[0];; s[-1];; s[1:4];; s[::-1];; xs['a'];; d['b'];; d.b;; d['zz'];; msgs[0].role;; msgs[0]['content']
xs[1.0];; xs[::0];; d[[1]];; n[0];; n.real;; s.__class__;; xs.append;; d.update;; xs.pop();; s._x;; d._private
s|upper;; s|lower;; s|title;; 'hELLO wORLD'|capitalize;; 'a-b c(d'|title;; "they're bill's"|title;; s|length;; xs|length;; d|length;; n|length
s.upper();; s.lower();; s.title();; "they're bill's".title();; s.capitalize();; s.split();; s.split('o');; 'a,b,,c'.split(',');; 'a b c'.split(none, 1);; ' a  b '.split()
s.startswith('He');; s.startswith(('x', 'H'));; s.endswith('ld');; s.find('o');; s.find('zz');; s.count('l');; s.replace('l', 'L');; s.replace('l', 'L', 1)
'  x  '.strip();; 'xxaxx'.strip('x');; '  x '.lstrip();; ' x  '.rstrip();; ws.strip();; ws|trim;; ws.strip()|length;; 'abc'.removeprefix('a');; 'abc'.removesuffix('c')
'123'.isdigit();; '12a'.isdigit();; ' '.isspace();; ''.isspace();; ','.join(['a', 'b']);; ','.join([1]);; 'ß'.upper();; 'İ'.lower();; 'ΣΑΣ'.lower();; s.split('')
d.items();; d.keys();; d.values();; d.get('a');; d.get('q');; d.get('q', 5);; d.items()|list;; d.keys()|list;; xs.index(1);; xs.count(3);; xs.index(9)
xs|join;; xs|join(', ');; msgs|join(',', attribute='role');; words|sort|list;; words|sort(case_sensitive=true)|list;; xs|sort(reverse=true)|list
words|sort|join;; msgs|sort(attribute='role')|map(attribute='role')|join;; [3, 'a']|sort;; xs|max;; xs|min;; words|max;; words|min;; []|max;; words|max(case_sensitive=true)
xs|sum;; xs|sum(start=10);; fl|sum;; msgs|sum(attribute='x');; xs|first;; xs|last;; []|first;; s|first;; s|last;; d|first;; xs|list;; s|list;; d|list
xs|reverse|list;; s|reverse;; xs|reverse;; words|unique|list;; words|unique(case_sensitive=true)|list;; xs|map('string')|join('-');; xs|map('abs')|list
msgs|selectattr('role', 'equalto', 'user')|list;; msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|list;; xs|select('odd')|list;; xs|reject('even')|list
xs|select|list;; [0, 1, '', 'a']|select|list;; xs|select('gt', 1)|list;; xs|select('in', [1, 2])|list;; msgs|map(attribute='missing', default='dflt')|list
xs|map|list;; xs|select('nosuchtest')|list;; xs|map('nosuchfilter')|list;; xs|select;; xs|map('upper')
undefined_var|default('dflt');; undefined_var|d('x');; e|default('dflt');; e|default('dflt', true);; z|default('dflt');; none|default('x', boolean=true)
d|dictsort;; d|dictsort(by='value');; {'b': 1, 'A': 2, 'a': 3}|dictsort;; {'b': 1, 'A': 2, 'a': 3}|dictsort(true);; d|dictsort(reverse=true)
d|items|list;; d|items;; '<a href="x">&\''|e;; '<b>'|escape;; '<b>'|safe;; 'x'|e|e;; n|string;; xs|string;; z|string;; t|string
'42'|int;; '4.7'|int;; 'x'|int;; 'x'|int(5);; '0x1A'|int(0, 16);; '1_000'|int;; 4.9|int;; -4.9|int;; true|int;; none|int;; '3.5'|float;; 'x'|float;; 7|float;; 'inf'|float;; '1e3'|float
3.14159|round;; 3.14159|round(2);; 2.5|round;; 3.5|round;; 2.675|round(2);; 3.14159|round(2, 'floor');; 3.14159|round(1, 'ceil');; 7|round;; -2.5|round;; 0.125|round(2);; 5|round(1, 'floor')
'%s-%s'|format(1, 2);; '%(a)s'|format(a=1);; '%d'|format('x');; 'x'|center(9);; 'ab'|center(9);; 'abc'|center(2);; 'ab'|center(10)
'a\nb\n\nc'|indent;; 'a\nb\n\nc'|indent(2, true);; 'a\nb\n\nc'|indent(2, blank=true);; 'a\nb'|indent('> ');; 'a\r\nb'|indent(1);; ''|indent(first=true)
'hello world foo bar baz'|truncate(12);; 'hello world foo bar baz'|truncate(12, true);; 'hello world'|truncate(9, end='!');; 'hello'|truncate(2);; 'a b c d e f g h i j'|truncate(10, leeway=0)
'one two, three'|wordcount;; 'x_y 3.4'|wordcount;; ''|wordcount;; 'a'|replace('a', 'b');; 'aaa'|replace('a', 'b', 2);; 'abc'|replace('', '-')
d|tojson;; xs|tojson;; nested|tojson;; nested|tojson(indent=2);; msgs|tojson(indent=4);; fl|tojson;; 'x'|tojson;; z|tojson;; t|tojson;; (1, 2)|tojson;; {}|tojson(indent=2);; []|tojson(indent=2)
d|tojson(sort_keys=true);; d|tojson(separators=(',', ':'));; {1: 'a', none: 'b', 2.5: 'c', false: 'd'}|tojson;; {(1,): 2}|tojson;; undefined_var|tojson;; d|tojson(indent='\t')
range(3)|list;; range(1, 10, 3)|list;; range(5, 0, -2)|list;; range(3);; range(0)|length;; range(200000)|list;; range(0, 10, 0)|list;; range('a')
dict(a=1, b=2);; dict();; namespace(a=1).a;; namespace(a=1).b;; namespace(a=1);; joiner;; cycler(1,2).current;; raise_exception('boom')
xs is defined;; undefined_var is defined;; undefined_var is undefined;; z is none;; n is number;; t is number;; f is float;; n is integer;; t is integer;; t is boolean
s is string;; d is mapping;; xs is mapping;; xs is iterable;; n is iterable;; s is sequence;; d is sequence;; n is sequence;; t is true;; 0 is false;; z is false
n is odd;; n is even;; n is divisibleby 7;; n is divisibleby(2);; 'a' is odd;; undefined_var is odd;; undefined_var is divisibleby 2;; 3.0 is odd;; -3 is odd
s is lower;; 'abc' is lower;; 'ABC' is upper;; '123' is upper;; n is eq 7;; n is == 7;; n is ne 7;; n is lt 8;; n is le 7;; n is gt 8;; n is ge 7;; n is greaterthan 6;; n is lessthan 6
1 is in xs;; 'a' is in 'cat';; n is sameas 7;; z is sameas none;; t is sameas true;; 'upper' is filter;; 'odd' is test;; 'nope' is filter;; s is callable;; s.upper is callable
n is not odd;; z is not none;; undefined_var is not defined;; xs|length is odd;; -n is odd;; not n is odd;; n is lt 8 and n is gt 6;; n is nosuchtest
xs|nosuchfilter;; xs|groupby('a');; s|wordwrap(5);; s|urlencode
""".strip()


def expr_cases():
    cases = []
    for line in (EXPRS + "\n" + MORE).split("\n"):
        cases.extend(e.strip() for e in line.split(";;"))
    return cases


# Whole templates: statements, whitespace control, scoping, macros.
TEMPLATES = [
    "{% for x in xs %}{{ x }},{% endfor %}",
    "{% for x in xs %}\n  {{ x }}\n{% endfor %}\n",
    "  {% for x in xs %}\n{{ x }}\n  {% endfor %}\nend",
    "{%- for x in xs -%}\n  {{ x }}  \n{%- endfor -%}\n!",
    "a  {{- 'b' -}}  c\n  {{+ 'd' }}\n",
    "{% if t %}\n  yes\n{% else %}\n  no\n{% endif %}\n",
    "  {%+ if t %}x{% endif %}",
    "a\n  {# comment #}\nb",
    "a {#- comment -#} b",
    "{% raw %}{{ x }}{% endraw %}",
    "{%- raw -%}  {{ x }}  {%- endraw -%}",
    "line1\n{{ 'x' }}\n",
    "{{ 'a' }}\n\n{{ 'b' }}\n\n",
    "x\r\ny\rz\n",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}",
    "{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}",
    "{% for x in xs %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }} {% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}",
    "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for x in [1, 1, 2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in n %}{% endfor %}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{% for x in undefined_var %}x{% endfor %}ok",
    "{% for c in 'abc' %}{{ c }}.{% endfor %}",
    "{% set x = 1 %}{% for i in xs %}{% set x = i %}{% endfor %}{{ x }}",
    "{% set ns = namespace(x=1) %}{% for i in xs %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{% set x %}captured {{ n }}{% endset %}[{{ x }}]",
    "{% set x | upper %}captured{% endset %}{{ x }}",
    "{% set d.x = 1 %}",
    "{% set xs = xs + [4] %}{{ xs }}",
    "{{ xs.append(4) }}{{ xs }}",
    "{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(b=5, a=0) }}",
    "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}inner{% endcall %}",
    "{% macro m() %}{{ caller(1) }}{% endmacro %}{% call(x) m() %}got {{ x }}{% endcall %}",
    "{% macro m() %}{{ varargs }}{% endmacro %}{{ m(1) }}",
    "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}",
    "{% filter upper %}hello {{ s }}{% endfilter %}",
    "{% filter trim|upper %}  x  {% endfilter %}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
    "{% if t %}{% set y = 1 %}{% endif %}{{ y }}",
    "{% if z %}a{% elif n > 5 %}b{% else %}c{% endif %}",
    "{{ raise_exception('custom error') }}",
    "{% if undefined_var.x %}x{% endif %}",
    "{% if undefined_var is string %}x{% else %}y{% endif %}",
    "{{ undefined_var + 1 }}",
    "{{ undefined_var ~ 'x' }}",
    "{{ undefined_var|length }}",
    "{{ undefined_var|upper }}",
    "{{ 'abc'[undefined_var] }}",
    "{{ undefined_var() }}",
    "{{ s() }}",
    "{{ x = 1 }}",
    "{% if %}{% endif %}",
    "{% for %}",
    "{% endfor %}",
    "{{ 'unterminated }}",
    "{{ 1 +}}",
    "{% if t %}unclosed",
    "{% unknowntag %}",
    "{{ (1, 2)[0] }}{{ [1, 2][-1] }}{{ {'a': 1}['a'] }}{{ 'abc'[1] }}",
    "{{ xs[0:2] }}{{ s[:3] }}",
    "{{ 1 if t }}{{ [1,2,3][1:] }}",
    "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}",
    "{% set j = joiner('|') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %}",
    "{% set d2 = dict(a=1) %}{{ d2.a }}{{ d2['a'] }}{{ d2.get('a') }}",
    "{% for m in msgs %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    "{% for m in msgs %}{% if m['role'] == 'user' %}U{% else %}A{% endif %}{% endfor %}",
    "{{ msgs[0].content|trim }}{{ msgs|length }}{{ msgs[-1]['role'] }}",
    "{%- if msgs[0].role == 'system' -%}sys{%- else -%}nosys{%- endif -%}",
    "{% for x in range(3) %}{{ x }}{% endfor %}",
    "{% for x in xs|sort %}{{ x }}{% endfor %}",
    "{% for x in xs|reverse %}{{ x }}{% endfor %}",
    "{% for x in xs|select('odd') %}{{ x }}{% endfor %}",
    "{% for k in d %}{{ k }}{% endfor %}",
    "{{ xs|select('odd') }}",
    "{{ 'a' }}{{ 1 }}{{ 1.5 }}{{ none }}{{ true }}{{ [none, true, 'x'] }}",
    "{{ \"x\" 'y' }}",
    "{{ 1_000 }} {{ 0x10 }} {{ 0o10 }} {{ 0b11 }} {{ 1e3 }} {{ 1_0.5 }}",
    "{{ True }}{{ False }}{{ None }}{{ true }}{{ none }}",
    "{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}",
    "{% for x in xs recursive %}{{ x }}{% endfor %}",
    "{{ loop }}",
    "{% for x in xs.append %}{% endfor %}ok",
    "{% for x in s._x %}{% endfor %}ok",
    "{% if s.zfill %}y{% endif %}",
    "{% break %}",
    "{{ ''.join(['a', 'b']) }}{{ '-'.join(xs|map('string')) }}",
    "{{ msgs|map(attribute='role')|join(', ') }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }}",
    "{{ s|upper|lower|title }}",
    "{{ -n|abs }} {{ -(n|abs) }} {{ -f|round }} {{ not t|string }}",
    "{{ 2 * 3 + 4 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 10 - 2 - 3 }} {{ 2 ** 2 * 3 }} {{ 7 // 2 * 2 }}",
    "{{ 1 ~ 2 + 3 }} {{ 'a' ~ 'b' == 'ab' }} {{ 1 < 2 == true }} {{ not 1 == 2 }}",
    "{{ n > 5 and n < 10 or false }}",
    "{{ xs|length > 2 }}{{ (xs|length) > 2 }}",
    "{{ s[n] }}{{ s[-n] }}",
    "{{ d['a'] + d.b }}",
    "{{ '{{' }}{{ '}}' }}{{ '{%' }}",
    "{% if true %}\n    indented\n{% endif %}",
    "<<\n{% for x in xs %}\n    {{ x }}\n{% endfor %}\n>>",
    "{% for x in xs -%}\n  {{ x }}\n{%- endfor %}",
    "text   \n   {% if t %}   \n   a\n   {% endif %}   \n   text",
    "\n\n{% if t %}\n\n{% endif %}\n\n",
    "{% if t %}   {% endif %}",
    "    {{ 'x' }}\n    {% set q = 1 %}\n    {{ q }}",
    "{%if t%}a{%endif%}",
    "{%- if t -%}  a  {%- endif -%}",
    "{{- ' ' -}}x{{- ' ' -}}",
    "{% set long = 'x' * 20000 %}{{ long|length }}",
    "{% for m in msgs %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' + '\\n' }}{% endfor %}{% if t %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "{{ bos }}{% for m in msgs %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}[INST] {{ m['content'] }} [/INST]{% endfor %}",
    "{%- set ns = namespace(found=false) -%}{%- for m in msgs -%}{%- if m.role == 'assistant' -%}{%- set ns.found = true -%}{%- endif -%}{%- endfor -%}{{ ns.found }}",
    "{% for m in msgs %}{{ m.content if m.content is string else m.content|tojson }}{% if not loop.last %}|{% endif %}{% endfor %}",
    "{%- for m in msgs|reverse -%}{{ loop.index }}{{ m.role[0]|upper }}{%- endfor -%}",
    "{{ msgs|selectattr('role', 'in', ['user', 'system'])|map(attribute='content')|join('\\n') }}",
    "{% set sys = msgs|selectattr('role', 'equalto', 'system')|list %}{{ sys|length }}{{ sys[0] is defined }}",
    "{{ (msgs|last).content }}{{ (msgs|first)['role'] }}",
    "{% for m in msgs %}{{ m.content.split('y')[0] }}{{ m.get('name', 'anon') }}{% endfor %}",
    "{{ msgs[0].content|replace('h', 'H')|center(6)|e }}",
    "{{ ('x' * 20000000)|length }}",
    "{% for i in range(2000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}done",
]


def whitespace_cases():
    """Every begin/end modifier of block, comment and print tags between
    text with spaces, tabs and newlines on both sides."""
    out = []
    mods = ["", "-", "+"]
    sides = [("a  \n  ", "  \n  b"), ("a\n", "\nb"), ("  ", "  "), ("x \t", "\t\n\n y")]
    for pre, post in sides:
        for b in mods:
            for e in mods:
                out.append(pre + "{%" + b + " if true " + e + "%}" + post + "{%" + b + " endif " + e + "%}" + post)
                out.append(pre + "{#" + b + " note " + e + "#}" + post)
                if b != "+" and e != "+":
                    out.append(pre + "{{" + b + " 'v' " + e + "}}" + post)
                out.append(pre + "{%" + b + " for i in [1, 2] " + e + "%}" + post + "{{ i }}" + pre + "{%" + b + " endfor " + e + "%}" + post)
    return out


MORE = r"""
'a　b'.split();; ' x '.strip();; '​x'.strip();; 'x'.rstrip();; 'a b'.split();; 'ǆ'.upper();; 'ǆa'.title();; 'ﬁ'.upper()
'hello'[1:-1];; 'hello'[10:];; 'hello'[-10:2];; [1, 2, 3][::-2];; [1, 2, 3][5:1:-1];; (1, 2, 3)[1:];; 'abc'[none:2]
{'a': [1, {'b': (2, 'c')}]};; [1.5, 1e20, 1e-7, 123456789.123];; [0.1, -1.0, 1e16, 12345678901234567.0];; 'tab	nl
'
{'a': 1}|list;; {'a': 1}.items()|list;; d|length > 2;; msgs|map(attribute='role')|unique|list;; xs|map('string')|map('upper')|list
'%s|%s' % ('a', none);; '%.2f' % 2.675;; '%5s|' % 'ab';; '%-6.2f|' % 3.14159;; '%s' % (none,);; '%s' % ((1, 2),);; '%%';; '%s %s' % ('x',)
'%(a)s %(b)r' % {'a': 1, 'b': 'x'};; '%10.4f' % -1.5;; '%x %X %o' % (255, 255, 8);; '%e' % 0.0;; '%g' % 1e20;; '%G' % 1e-20;; '%.0f' % 2.5
range(10)|batch(3)|list;; xs|slice(2)|list;; [1, 2, 3]|sum / 3;; (xs|sum) / (xs|length);; xs|max - xs|min
n // 0.0;; 5 % -3;; -5 % 3;; 5.5 % 2;; -5.5 // 2;; 2 ** -2;; (-8) ** (1 / 3);; 0 ** 0;; 0.0 ** -1;; 10 ** 20;; 2 ** 62 + 2 ** 62
true + true;; true * 3;; 1 == true;; 2 == true;; none == none;; none == false;; 'a' == 'a';; [] == ();; {} == {}
'b' > 'a' > 'A';; [1, 'a'] < [1, 'b'];; [1, 'a'] < [2, 1];; [1, 'a'] < [1, 2];; (1, 2) < (1, 2, 3)
"a" ~ "b" ~ 3 ~ 4.0 ~ none ~ true ~ [1] ~ {'k': 'v'};; 'x' ~ undefined_var ~ 'y'
s.format(1);; s.zfill(3);; s.splitlines();; d.copy();; xs.copy();; xs.sort;; d.pop;; xs.append|length;; s.__class__;; x|default;; namespace(a=1).items
namespace(a=1, b=[1]).b;; namespace(d).a;; cycler('a').next();; joiner()();; dict(a=1)|tojson;; dict(a=1).items()|list
""".strip()

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & \"later\"",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}},
                         "required": ["city"]}}}]

CONVERSATIONS = {
    "single": [{"role": "user", "content": "Hello!"}],
    "system": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
    "multi": [{"role": "system", "content": "  Be kind.  "}, {"role": "user", "content": "Q1"},
              {"role": "assistant", "content": "A1\n"}, {"role": "user", "content": " Q2 \n\n"},
              {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA2"}, {"role": "user", "content": "Q3"}],
    "unicode": [{"role": "user", "content": "日本語 🧑🏽‍💻 \u0301e\tx\u001c"}],
    "tool_call": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                      "name": "get_weather", "arguments": {"city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 20}"}, {"role": "assistant", "content": "20 degrees."}],
    "null_content": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None}],
    "bad_role": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    "no_user": [{"role": "assistant", "content": "x"}],
    "empty": [],
}


def chat_cases():
    cases = []
    for model in ("llama3", "qwen3", "gemma3"):
        with open(os.path.join(MODELS, model, "tokenizer_config.json")) as fh:
            cfg = json.load(fh)
        special = {}
        for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
            v = cfg.get(k)
            v = v.get("content") if isinstance(v, dict) else v
            if v:
                special[k] = v
        for name, msgs in CONVERSATIONS.items():
            for gen in (False, True):
                for tools in ((None, TOOLS) if model in ("qwen3", "llama3") else (None,)):
                    ctx = dict(special, messages=msgs, add_generation_prompt=gen, tools=tools,
                               documents=None, date_string="26 Jul 2024")
                    cases.append({"name": f"{model}/{name}/gen={gen}/tools={tools is not None}",
                                  "template": cfg["chat_template"], "context": ctx})
    return cases


# The cases of host/internal/tokenizer/chattemplate_test.go: a template
# rendered for one user message, as RenderChat does.
CHAT_UNITS = [
    ('{{ messages[0].content | trim }}', '\x1c hi \x1f'),
    ("{{ messages[0].content | trim('h') }}", 'hih'),
    ('{{ messages[0].content.strip() }}', '\x1chi\x1f'),
    ('{{ messages[0].content.rstrip() }}', 'hi\xa0'),
    ('{{ messages[0].content.strip() }}', ' hi\n'),
    ('{{ x.y }}', 'hi'),
    ('{% if x.y is defined %}a{% endif %}', 'hi'),
    ('{% if x is defined and x.y %}a{% endif %}b', 'hi'),
    ('{{ tools.attr }}|', 'hi'),
    ('{{ tools.attr.b }}', 'hi'),
    ('{{ messages[0].tool_calls[0] }}', 'hi'),
    ('{{ x + 1 }}', 'hi'),
    ('{{ -x }}', 'hi'),
    ('{% for t in tools %}x{% endfor %}', 'hi'),
    ('{% for t in x %}x{% endfor %}y', 'hi'),
    ('{{ -3|abs }}', 'hi'),
    ('{{ - 3 | string }}', 'hi'),
    ('{{ +x is defined }}', 'hi'),
    ('{{ -1 is number }}', 'hi'),
    ('{{ (-3)|abs }} {{ 0 - 3|abs }} {{ -true }} {{ -1.5 }} {{ -(1) }} {{ +2 }} {{ -2**2 }}', 'hi'),
    ("{{ -'a' }}", 'hi'),
    ('{{ -[1] }}', 'hi'),
    ('{{ -none }}', 'hi'),
    ('{{ +{} }}', 'hi'),
    ('{{ -x }}', 'hi'),
    ('{{ "%s" % 1 }}', 'hi'),
    ('{{ "%s" % x }}', 'hi'),
    ("{{ 7 % 4 }} {{ -7 % 3 }} {{ -7 // 2 }} {{ 2 ** 3 }} {{ 10 / 4 }} {{ 'ab' * 2 }}", 'hi'),
    ("{{ 1 in [1.0] }} {{ 1 == true }} {{ 'a' in 'abc' }} {{ [1] + [2] }}", 'hi'),
    ("{{ 'x' + 1 }}", 'hi'),
    ('{{ none + 1 }}', 'hi'),
    ('{{ 1 / 0 }}', 'hi'),
    ('{{ none < 1 }}', 'hi'),
    ("{{ x is iterable }} {{ 'a' is sequence }} {{ {} is sequence }} {{ 1.0 is integer }} {{ true is number }}", 'hi'),
    ("{{ 3.0 is odd }} {{ 7 is divisibleby(3) }} {{ 9 is divisibleby(3) }} {{ '123' is upper }} {{ 'AB1' is upper }}", 'hi'),
    ("{{ 'abc' | first }} {{ 'abc' | last }} {{ [3, 1] | first }} {{ none | string }} {{ 'straße' | upper }}", 'hi'),
    ("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.5 | round(0, 'floor') }} {{ 7 | round }} {{ (0 - 3) | abs }}", 'hi'),
    ("{{ 'a' | indent }}", 'hi'),
    ('{{ none | int }}|{{ " 4_2 " | int }}|{{ "4.7e1" | int }}|{{ "nan" | int }}|{{ "0b11" | int(base=2) }}|{{ "0x1A" | int(base=16) }}|{{ "z" | int(7) }}|{{ true | int }}|{{ [1] | int }}|{{ "-0x1a" | int(base=16) }}|{{ "1__0" | int }}|{{ "_1" | int }}|{{ 3.9 | int }}|{{ 1 - 3.9 | int }}|{{ "1e400" | int }}|{{ "inf" | int }}', 'hi'),
    ('{{ "hELLO wORLD" | capitalize }}|{{ "ǆa" | capitalize }}', 'hi'),
    ("{{ 'a b c'.split(' ', 1) }}", 'hi'),
    ("{{ 'abc'.endswith(('c', 'x')) }}", 'hi'),
    ('{{ messages[0].content.upper() }}', 'straße'),
    ('{{ messages[0].content.upper() }}', 'stre'),
    ("{%- if true -%}<|s|>R E: {{ 'max' }}{%- endif -%}", 'hi'),
    ("a \n  {% if true %}\n  b {{ 'c' }}\n {%- endif %}\n{# x #}  \n{{- 'd' -}}  e", 'hi'),
    ('{% set l = [] %}{% if false %}{{ l.append(1) }}{% endif %}{{ l }}', 'hi'),
    ('{% set l = [] %}{% set _ = l.append(1) %}{{ l }}', 'hi'),
    ('{% for m in messages %}{{ loop.depth }}{% endfor %}', 'hi'),
    ("{{ {'role': 'user', 'content': messages[0].content} | tojson(indent=2) }}", 'a<b&c>\u2028é\x01'),
    ('{{ messages | tojson }}', 'a<b"\\'),
    ("{{ messages | tojson(ensure_ascii=True, sort_keys=True, separators=(',', ':')) }}", 'é😀'),
    ("{{ [1, [], {}, [2]] | tojson(indent='\t') }}", 'hi'),
    ('{{ messages[0] }}', "it's"),
    ('{{ [1, messages[0].content, none, true, 1.5] }}', 'a\'b"\n\xa0é'),
    ('{{ tools }}', 'hi'),
    ('{{ 0.1 + 0.2 }} {{ 2.0 }} {{ 1 / 2 }}', 'hi'),
    ("{{ 'x' ~ none ~ 1.0 }}", 'hi'),
    ('{{ messages[0].content | truncate(10) }}', 'abcdefghijklmnopqrstuvwxyz'),
    ('{{ messages[0].content | truncate(12) }}', 'hello world foo bar baz'),
    ("{{ messages[0].content | truncate(12, true, '..', 0) }}", 'hello world foo bar baz'),
    ('{{ messages[0].content | truncate(12) }}', 'hello world foo'),
    ("{{ '%s-%d %%' | format(messages[0].content, 3) }}", 'hi'),
    ("{{ '%s' | format(none) }}", 'hi'),
    ('{{ messages[0].content | format(1) }}', '%x'),
    ("{{ 'a' is escaped }}", 'hi'),
    ('{{ messages[0].content | fromjson }}', 'hi'),
    ('{{ messages[0].content | title }}', 'hi'),
    ('{{ messages[0].content.title() }}', 'hi'),
    ("{{ ['a', 'b'] | map('upper') | list }} {{ messages | map(attribute='role') | join(',') }} {{ messages | map(attribute='x', default='d') | list }}", 'hi'),
    ("{{ ['a'] | map('center') | list }}", 'hi'),
    ('{% filter upper %}x{% endfilter %}', 'hi'),
    ('{{ dict(b=1, a=2) }}', 'hi'),
    ('{{ dict(b=1) }}', 'hi'),
]


def unit_cases():
    return [{"name": f"unit/{i}", "template": t, "context": {
        "messages": [{"role": "user", "content": c}], "add_generation_prompt": True, "tools": None,
        "documents": None, "bos_token": "<s>"}} for i, (t, c) in enumerate(CHAT_UNITS)]


def render(env, template, context):
    try:
        return {"rendering": env.from_string(template).render(**context)}
    except Exception as e:  # any error a render raises: TypeError, ZeroDivisionError, OverflowError...
        return {"error": {"type": type(e).__name__, "message": str(e)}}


def main():
    env = environment()
    cases = [{"name": f"expr/{i}", "template": "{{ " + e + " }}", "context": CTX} for i, e in enumerate(expr_cases())]
    cases += [{"name": f"template/{i}", "template": t, "context": CTX} for i, t in enumerate(TEMPLATES)]
    cases += [{"name": f"whitespace/{i}", "template": t, "context": CTX} for i, t in enumerate(whitespace_cases())]
    cases += chat_cases()
    cases += unit_cases()
    for c in cases:
        c.update(render(env, c["template"], json.loads(json.dumps(c["context"]))))
    # Shared contexts and long templates are stored once, named by a
    # case's context_ref or template_ref.
    contexts, templates = {"ctx": CTX}, {}
    for c in cases:
        if c["context"] is CTX:
            del c["context"]
            c["context_ref"] = "ctx"
        if len(c["template"]) > 500:
            ref = c["name"].split("/")[0]
            if templates.get(ref, c["template"]) != c["template"]:
                ref = c["name"]
            templates[ref] = c.pop("template")
            c["template_ref"] = ref
    with open(OUT, "w") as fh:
        json.dump({"jinja2": jinja2.__version__, "contexts": contexts, "templates": templates, "cases": cases},
                  fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    print(f"{len(cases)} cases written to {OUT}", file=sys.stderr)


main()
