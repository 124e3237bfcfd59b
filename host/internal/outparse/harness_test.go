package outparse

import (
	"fmt"
	"strings"
	"testing"
)

// Whole is a parse's result merged: every piece's text joined, each
// call's pieces joined by index.
type Whole struct {
	Content, Reasoning string
	Calls              []Call
	Failures           int
}

// Call is one whole call of a Whole.
type Call struct{ ID, Name, Arguments string }

// tcase is one documented (or malformed) output and what it parses to.
type tcase struct {
	name            string
	reasoning, tool string
	opts            Options
	out             string
	want            Whole
}

// parse feeds out in pieces cut at cuts (byte offsets) and merges the
// result.
func parse(t *testing.T, c tcase, cuts []int) Whole {
	t.Helper()
	p, err := New(c.reasoning, c.tool, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	var w Whole
	var content, reasoning strings.Builder
	add := func(d Delta) {
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		for _, pc := range d.Calls {
			if pc.Index == len(w.Calls) {
				w.Calls = append(w.Calls, Call{})
			}
			if pc.Index != len(w.Calls)-1 {
				t.Fatalf("piece of call %d after call %d began", pc.Index, len(w.Calls)-1)
			}
			cl := &w.Calls[pc.Index]
			cl.ID += pc.ID
			cl.Name += pc.Name
			cl.Arguments += pc.Arguments
		}
	}
	last := 0
	for _, cut := range append(cuts, len(c.out)) {
		add(p.Feed(c.out[last:cut]))
		last = cut
	}
	add(p.Finish())
	w.Content, w.Reasoning, w.Failures = content.String(), reasoning.String(), p.Failures()
	if p.Calls() != len(w.Calls) {
		t.Errorf("Calls() = %d, %d went out", p.Calls(), len(w.Calls))
	}
	return w
}

// run checks c fed whole, split at every byte offset, and byte by byte.
func run(t *testing.T, cases []tcase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.want.Calls {
				if c.want.Calls[i].ID == "" {
					c.want.Calls[i].ID = fmt.Sprintf("call_%d", i)
				}
			}
			same(t, "whole", parse(t, c, nil), c.want)
			for k := 1; k < len(c.out); k++ {
				same(t, fmt.Sprintf("split at %d", k), parse(t, c, []int{k}), c.want)
			}
			bytes := make([]int, 0, len(c.out))
			for k := 1; k < len(c.out); k++ {
				bytes = append(bytes, k)
			}
			same(t, "byte by byte", parse(t, c, bytes), c.want)
		})
	}
}

func same(t *testing.T, how string, got, want Whole) {
	t.Helper()
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", how, got, want)
	}
}

// weather is the tool most cases offer.
var weather = Options{Functions: []string{"get_weather", "get_time"}}
