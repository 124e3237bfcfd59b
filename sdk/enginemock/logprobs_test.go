package enginemock_test

import (
	"math"
	"testing"

	"github.com/vigilhq/vigil/sdk/enginemock"
)

// TestPositionLogprobs: every distribution is one a real engine could
// give (finite, <= 0, sorted, distinct ids, ranks 1..k), the chosen token's
// entry in Top equals Chosen, and chosen falls outside a small top-k for
// some tokens, which the TensorRT-LLM quirk needs.
func TestPositionLogprobs(t *testing.T) {
	outside := 0
	for chosen := uint32(0); chosen < 50; chosen++ {
		for _, k := range []int{0, 1, 2, 5, 20} {
			d := enginemock.PositionLogprobs(chosen, k)
			c := d.Chosen
			if c.TokenID != chosen || c.Rank < 1 || c.Rank > enginemock.ChosenRanks || !valid(c.Logprob) {
				t.Fatalf("PositionLogprobs(%d, %d).Chosen = %+v", chosen, k, c)
			}
			if len(d.Top) != k {
				t.Fatalf("PositionLogprobs(%d, %d): %d top entries, want %d", chosen, k, len(d.Top), k)
			}
			seen, found := map[uint32]bool{}, false
			for i, e := range d.Top {
				if e.Rank != uint32(i+1) || !valid(e.Logprob) || seen[e.TokenID] || (i > 0 && e.Logprob >= d.Top[i-1].Logprob) {
					t.Fatalf("PositionLogprobs(%d, %d).Top[%d] = %+v in %+v", chosen, k, i, e, d.Top)
				}
				seen[e.TokenID] = true
				if e.TokenID == chosen {
					found = true
					if e != c {
						t.Fatalf("PositionLogprobs(%d, %d): chosen %+v, in Top %+v", chosen, k, c, e)
					}
				}
			}
			if found != (int(c.Rank) <= k) {
				t.Fatalf("PositionLogprobs(%d, %d): chosen rank %d, in Top: %v", chosen, k, c.Rank, found)
			}
			if !found && k > 0 {
				outside++
			}
		}
	}
	if outside == 0 {
		t.Fatal("no chosen token fell outside its top-k")
	}
}

func valid(l float32) bool {
	return l <= 0 && !math.IsInf(float64(l), 0) && !math.IsNaN(float64(l))
}
