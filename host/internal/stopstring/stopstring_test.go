package stopstring

import (
	"strings"
	"testing"
)

func run(stops []string, pieces ...string) (out string, stopped bool) {
	m := New(stops)
	var b strings.Builder
	for _, p := range pieces {
		e, s := m.Push(p)
		b.WriteString(e)
		if s {
			return b.String(), true
		}
	}
	b.WriteString(m.Flush())
	return b.String(), false
}

func TestStopSpanningPieces(t *testing.T) {
	out, stopped := run([]string{"END"}, "Hello E", "N", "D and more")
	if out != "Hello " || !stopped {
		t.Fatalf("got %q stopped=%v, want %q stopped", out, stopped, "Hello ")
	}
}

func TestHeldTextReleasedWhenNoMatch(t *testing.T) {
	m := New([]string{"END"})
	if e, _ := m.Push("Hello E"); e != "Hello " {
		t.Fatalf("emitted %q, want the text before a possible stop", e)
	}
	if e, _ := m.Push("ve"); e != "Eve" {
		t.Fatalf("emitted %q, want the held text once it cannot match", e)
	}
	if e, _ := m.Push("EN"); e != "" {
		t.Fatalf("emitted %q, want EN held", e)
	}
	if f := m.Flush(); f != "EN" {
		t.Fatalf("flush %q, want EN", f)
	}
}

func TestEarliestStopWins(t *testing.T) {
	out, stopped := run([]string{"world", "lo w"}, "hello world")
	if out != "hel" || !stopped {
		t.Fatalf("got %q, want %q", out, "hel")
	}
}

func TestNoStops(t *testing.T) {
	out, stopped := run(nil, "a", "b")
	if out != "ab" || stopped {
		t.Fatalf("got %q stopped=%v", out, stopped)
	}
}

func TestMultiByte(t *testing.T) {
	out, stopped := run([]string{"🙂!"}, "ok 🙂", "!", " rest")
	if out != "ok " || !stopped {
		t.Fatalf("got %q", out)
	}
}

// Every split of the text into two pieces gives the same output.
func TestAllSplits(t *testing.T) {
	text := "abc<|stop|>def"
	for i := 0; i <= len(text); i++ {
		out, stopped := run([]string{"<|stop|>"}, text[:i], text[i:])
		if out != "abc" || !stopped {
			t.Fatalf("split %d: got %q stopped=%v", i, out, stopped)
		}
	}
}
