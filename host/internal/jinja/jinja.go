// Package jinja renders Jinja templates as Python's jinja2 3.1 does in
// transformers' chat-template environment: ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and loop controls, transformers'
// tojson, raise_exception and strftime_now. Its one user is
// host/internal/tokenizer.
//
// Own code because no Go library renders as jinja2 does (operator
// precedence, Python's value printing and operators, Undefined, the
// sandbox), and what the model sees must be what transformers renders:
// a construct this engine cannot render exactly is refused at Compile
// (naming it and its line) or at Render, never rendered differently.
package jinja

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Error is a compile or render error. Msg is jinja2's message.
type Error struct {
	Line      int
	Msg       string
	undefined bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Limits against a hostile template or input.
const (
	maxOutput = 16 << 20 // bytes of rendered text
	maxItems  = 1 << 20  // items of a built list, and loop iterations
	maxDepth  = 200      // macro call depth
	// maxWork bounds the bytes of all strings and lists a
	// render builds, so a loop cannot build 16 MiB values forever.
	maxWork = 1 << 28
)

var errTooBig = &Error{Msg: "the template's output or a value in it exceeds vigil's limit"}

// Template is a compiled template, safe for concurrent Render calls.
type Template struct {
	body []node
}

// Compile parses src; errors name the line and construct.
func Compile(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				e = &Error{Msg: fmt.Sprintf("vigil's template engine failed: %v", r)}
			}
			t, err = nil, e
		}
	}()
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body := p.subparse()
	return &Template{body: body}, nil
}

// Render renders the template with vars, Go values made of nil, bool,
// int, int64, float64, string, []string, []any, map[string]any (in
// sorted key order) and *Dict (in its order).
func (t *Template) Render(vars map[string]any) (out string, err error) {
	ev := &evaluator{}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Msg: fmt.Sprintf("vigil's template engine failed: %v", r)}
		}
	}()
	root := &frame{vars: map[string]any{}}
	for k, v := range globals() {
		root.vars[k] = v
	}
	for k, v := range vars {
		root.vars[k] = FromGo(v)
	}
	var b strings.Builder
	ev.out = &b
	if err := ev.exec(t.body, &frame{vars: map[string]any{}, parent: root}); err != nil {
		var ctl *ctlSignal
		if errors.As(err, &ctl) {
			return "", &Error{Msg: "break or continue outside a loop"}
		}
		return "", err
	}
	return b.String(), nil
}

// FromGo converts Go values to the engine's.
func FromGo(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case []string:
		l := make([]any, len(x))
		for i, s := range x {
			l[i] = s
		}
		return l
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = FromGo(e)
		}
		return l
	case map[string]any:
		// A Go map has no order; sorted keys at least print the same
		// every time. Pass a *Dict where the order matters (messages).
		d := NewDict()
		for _, k := range slices.Sorted(maps.Keys(x)) {
			_ = d.Set(k, FromGo(x[k]))
		}
		return d
	}
	return v
}

// RaiseError is the error of the template's raise_exception(message).
type RaiseError struct{ Message string }

func (e *RaiseError) Error() string { return e.Message }
