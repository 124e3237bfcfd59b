package tokenizer

import (
	"fmt"
	"reflect"
	"strings"
)

// The library applies whitespace control ({%- -%}, lstrip_blocks,
// trim_blocks) to the nearest text even when another tag stands between
// ("a: {{ x }}{%- endif %}" loses the space after "a:"); jinja2 trims
// only text next to the tag. fixWhitespace scans the source as the
// library does, trims each text as jinja2 does, and sets the parsed
// template's text nodes (one per text, in source order) to that.

type wsSegment struct {
	kind              byte // 't'ext, '{' expression, '%' statement, '#' comment
	text              string
	trimLeft, trimRit bool
}

// scanSegments splits src as the library's scanner does.
func scanSegments(src string) []wsSegment {
	var segs []wsSegment
	start := 0
	for i := 0; i+1 < len(src); {
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[src[i+1]]
		if src[i] != '{' || closer == "" {
			i++
			continue
		}
		if i > start {
			segs = append(segs, wsSegment{kind: 't', text: src[start:i]})
		}
		s := wsSegment{kind: src[i+1]}
		i += 2
		if i < len(src) && src[i] == '-' {
			s.trimLeft, i = true, i+1
		}
		i = scanTag(src, i, &s, closer)
		segs = append(segs, s)
		start = i
	}
	if start < len(src) {
		segs = append(segs, wsSegment{kind: 't', text: src[start:]})
	}
	return segs
}

// scanTag finds the closer from i (quoted strings skipped outside
// comments) and returns the index after it.
func scanTag(src string, i int, s *wsSegment, closer string) int {
	from := i
	for i < len(src) {
		c := src[i]
		if s.kind != '#' && (c == '\'' || c == '"') {
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' && i+1 < len(src) {
					i++
				}
			}
			i++
			continue
		}
		if c == '-' && strings.HasPrefix(src[i+1:], closer) {
			s.text, s.trimRit = src[from:i], true
			return i + 3
		}
		if strings.HasPrefix(src[i:], closer) {
			s.text = src[from:i]
			return i + 2
		}
		i++
	}
	return len(src)
}

// jinjaTrim trims the texts of segs as jinja2 does with trim_blocks and
// lstrip_blocks: a tag's whitespace control reaches only adjacent text.
func jinjaTrim(segs []wsSegment) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.text
	}
	block := func(s wsSegment) bool { return s.kind == '%' || s.kind == '#' }
	for i, s := range segs {
		if i == 0 || segs[i-1].kind != 't' {
			continue
		}
		switch {
		case s.trimLeft:
			out[i-1] = strings.TrimRightFunc(out[i-1], pyWhitespace)
		case block(s):
			out[i-1] = lstripBlock(out[i-1], i == 1)
		}
	}
	for i, s := range segs {
		if i+1 == len(segs) || segs[i+1].kind != 't' {
			continue
		}
		switch {
		case s.trimRit:
			out[i+1] = strings.TrimLeftFunc(out[i+1], pyWhitespace)
		case block(s):
			out[i+1] = strings.TrimPrefix(strings.TrimPrefix(out[i+1], "\r"), "\n")
		}
	}
	return out
}

// lstripBlock removes the spaces and tabs before a block tag that
// starts its line.
func lstripBlock(s string, atStart bool) string {
	t := strings.TrimRight(s, " \t")
	if (t == "" && atStart) || strings.HasSuffix(t, "\n") {
		return t
	}
	return s
}

// fixWhitespace sets the template's text nodes (nodes: the parsed
// template's node slice) to jinja2's trimming of src.
func fixWhitespace(src string, nodes reflect.Value) error {
	segs := scanSegments(src)
	want := jinjaTrim(segs)
	var texts []string
	var raw []string
	for i, s := range segs {
		if s.kind == 't' {
			texts, raw = append(texts, want[i]), append(raw, s.text)
		}
	}
	var got []reflect.Value
	collectText(nodes, &got)
	if len(got) != len(texts) {
		return fmt.Errorf("a {%% raw %%} block or text the whitespace check cannot follow")
	}
	for i, f := range got {
		if !strings.Contains(raw[i], f.String()) {
			return fmt.Errorf("text the whitespace check cannot follow")
		}
		setString(f, texts[i])
	}
	return nil
}

// collectText appends the text field of every text node, in source order.
func collectText(v reflect.Value, out *[]reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectText(v.Elem(), out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectText(v.Index(i), out)
		}
	case reflect.Struct:
		if v.Type().PkgPath() == jinjaPkg && v.Type().Name() == "textNode" {
			*out = append(*out, v.FieldByName("text"))
			return
		}
		for i := range v.NumField() {
			collectText(v.Field(i), out)
		}
	}
}
