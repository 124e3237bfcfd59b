package stats

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Summarize must sort
	}
	for name, tc := range map[string]struct {
		in   []time.Duration
		want Summary
	}{
		"none":    {nil, Summary{}},
		"one":     {ms(7), Summary{N: 1, P50: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		"two":     {ms(9, 1), Summary{N: 2, P50: time.Millisecond, P99: 9 * time.Millisecond, Max: 9 * time.Millisecond}},
		"hundred": {ms(hundred...), Summary{N: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := Summarize(tc.in); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}
