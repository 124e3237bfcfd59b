package jinja

import (
	"fmt"
	"strings"
	"time"
)

// maxRange is jinja2's sandbox MAX_RANGE.
const maxRange = 100000

func globals() map[string]any {
	return map[string]any{
		"range": builtin(gRange), "dict": builtin(gDict), "namespace": builtin(gNamespace),
		"cycler": builtin(gCycler), "joiner": builtin(gJoiner),
		"raise_exception": builtin(gRaise), "strftime_now": builtin(gStrftime),
	}
}

func gRange(_ *evaluator, a *args) (any, error) {
	if len(a.names) > 0 {
		return nil, typeErr("range() takes no keyword arguments")
	}
	var p [3]int64
	for i, v := range a.pos {
		n, _, isF, ok := num(v)
		if !ok || isF || i > 2 {
			return nil, typeErr("'%s' object cannot be interpreted as an integer", typeName(v))
		}
		p[i] = n
	}
	start, stop, step := int64(0), p[0], int64(1)
	switch len(a.pos) {
	case 0:
		return nil, typeErr("range expected at least 1 argument, got 0")
	case 2, 3:
		start, stop = p[0], p[1]
		if len(a.pos) == 3 {
			step = p[2]
		}
	}
	if step == 0 {
		return nil, typeErr("range() arg 3 must not be zero")
	}
	n := rangeLen(start, stop, step)
	if n > maxRange {
		return nil, typeErr("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}
	items := make([]any, n)
	for k := range items {
		items[k] = start + int64(k)*step
	}
	r := fmt.Sprintf("range(%d, %d)", start, stop)
	if step != 1 {
		r = fmt.Sprintf("range(%d, %d, %d)", start, stop, step)
	}
	return &Gen{items: items, kind: "range", repr: r}, nil
}

func kwDict(a *args) *Dict {
	d := NewDict()
	for i, n := range a.names {
		_ = d.Set(n, a.kw[i])
	}
	return d
}

func gDict(_ *evaluator, a *args) (any, error) {
	if len(a.pos) > 0 {
		return nil, typeErr("vigil's template engine builds dict() from keyword arguments only")
	}
	return kwDict(a), nil
}

func gNamespace(_ *evaluator, a *args) (any, error) {
	d := NewDict()
	for _, p := range a.pos {
		src, ok := p.(*Dict)
		if !ok {
			return nil, typeErr("vigil's template engine builds namespace() from a dict or keyword arguments")
		}
		for i, k := range src.keys {
			_ = d.Set(k, src.vals[i])
		}
	}
	for i, n := range a.names {
		_ = d.Set(n, a.kw[i])
	}
	return &Namespace{d: d}, nil
}

type cyclerObj struct {
	items []any
	pos   int
}

func gCycler(_ *evaluator, a *args) (any, error) {
	if len(a.pos) == 0 {
		return nil, typeErr("at least one item has to be provided")
	}
	return &cyclerObj{items: a.pos}, nil
}

func (c *cyclerObj) attr(name string) any {
	switch name {
	case "current":
		return c.items[c.pos]
	case "next", "reset":
		return &method{recv: c, name: name}
	}
	return undefAttr(c, name)
}

func (c *cyclerObj) call(name string, _ []any) (any, error) {
	if name == "reset" {
		c.pos = 0
		return nil, nil
	}
	v := c.items[c.pos]
	c.pos = (c.pos + 1) % len(c.items)
	return v, nil
}

type joinerObj struct {
	sep   any
	fired bool
}

func gJoiner(_ *evaluator, a *args) (any, error) {
	return &method{recv: &joinerObj{sep: a.or(0, "sep", ", ")}, name: "__call__"}, nil
}

func (j *joinerObj) call(string, []any) (any, error) {
	if !j.fired {
		j.fired = true
		return "", nil
	}
	return j.sep, nil
}

func gRaise(_ *evaluator, a *args) (any, error) {
	return nil, &RaiseError{Message: pyStr(a.or(0, "message", ""))}
}

func gStrftime(_ *evaluator, a *args) (any, error) {
	f, ok := a.or(0, "format", nil).(string)
	if !ok {
		return nil, typeErr("strftime() argument 1 must be str")
	}
	return strftime(time.Now(), f)
}

// strftime is C's strftime for the directives chat templates use, with
// glibc's "-" (no padding) flag.
func strftime(t time.Time, f string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		noPad := f[i] == '-' && i+1 < len(f)
		if noPad {
			i++
		}
		s, ok := strftimeOne(t, f[i], noPad)
		if !ok {
			return "", typeErr("vigil's template engine does not implement strftime's %%%c", f[i])
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func strftimeOne(t time.Time, c byte, noPad bool) (string, bool) {
	n := func(v, w int) string {
		if noPad {
			return fmt.Sprint(v)
		}
		return fmt.Sprintf("%0*d", w, v)
	}
	switch c {
	case 'Y':
		return fmt.Sprint(t.Year()), true
	case 'y':
		return n(t.Year()%100, 2), true
	case 'm':
		return n(int(t.Month()), 2), true
	case 'd':
		return n(t.Day(), 2), true
	case 'H':
		return n(t.Hour(), 2), true
	case 'I':
		return n((t.Hour()+11)%12+1, 2), true
	case 'M':
		return n(t.Minute(), 2), true
	case 'S':
		return n(t.Second(), 2), true
	case 'j':
		return n(t.YearDay(), 3), true
	case 'p':
		return t.Format("PM"), true
	case 'B':
		return t.Month().String(), true
	case 'b':
		return t.Month().String()[:3], true
	case 'A':
		return t.Weekday().String(), true
	case 'a':
		return t.Weekday().String()[:3], true
	case '%':
		return "%", true
	}
	return "", false
}

// rangeLen is len(range(start, stop, step)), step not 0, without
// overflow for any int64s.
func rangeLen(start, stop, step int64) int64 {
	lo, hi, st := start, stop, step
	if step < 0 {
		lo, hi, st = stop, start, -step
	}
	if lo >= hi {
		return 0
	}
	d := uint64(hi) - uint64(lo)
	return int64(min((d-1)/uint64(st)+1, maxRange+1))
}
