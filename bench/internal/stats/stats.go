// Package stats summarises benchmark samples.
package stats

import (
	"slices"
	"time"
)

// Summary describes a set of duration samples.
type Summary struct {
	N             int
	P50, P99, Max time.Duration
}

// Summarize returns the nearest-rank percentiles of d; with fewer than 100
// samples p99 is the maximum. The zero Summary describes no samples.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return Summary{N: len(s), P50: Percentile(s, 50), P99: Percentile(s, 99), Max: s[len(s)-1]}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest sample with at least p% of the samples at or below it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// Nearest rank, 1-based: ceil(p/100 * n), computed in integers to
	// keep 99% of 100 at rank 99 rather than a float's 100.
	n := len(sorted)
	rank := (int(p*100)*n + 9999) / 10000
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}
