package enginemock

import "math"

// Logprob is one token's log probability at a position of a mock
// generation, and its rank there (1 the likeliest).
type Logprob struct {
	TokenID uint32
	Logprob float32
	Rank    uint32
}

// Distribution is what a mock engine knows of one position: the chosen
// (sampled, or prompt) token and the likeliest tokens there.
type Distribution struct {
	// Chosen is the position's token, with its log probability and rank.
	Chosen Logprob
	// Top are the k likeliest tokens, most likely first; Chosen is among
	// them when its rank is at most k.
	Top []Logprob
}

// Ranks are the chosen token's ranks the mocks give, 1 to ChosenRanks.
const ChosenRanks = 5

// PositionLogprobs is the distribution every mock engine gives at a
// position whose token is chosen, with the k likeliest tokens, so that
// tests can predict each engine's logprobs. It depends on chosen alone:
//
//   - chosen's rank is 1 + chosen%ChosenRanks, so it is outside a small
//     top-k for some tokens;
//   - the token at rank r has log probability -r·ln 2 (probabilities 1/2,
//     1/4, ...: finite, below 0, summing below 1);
//   - the other ranks hold chosen+1, chosen+2, ... in order (in 31 bits,
//     as SGLang's ids are int32), skipping chosen's rank.
//
// The prompt's first position has no distribution: engines send none.
func PositionLogprobs(chosen uint32, k int) Distribution {
	rank := 1 + chosen%ChosenRanks
	d := Distribution{Chosen: Logprob{TokenID: chosen, Logprob: rankLogprob(rank), Rank: rank}}
	if k <= 0 {
		return d
	}
	d.Top = make([]Logprob, k)
	alt := uint32(0)
	for i := range d.Top {
		r := uint32(i) + 1
		if r == rank {
			d.Top[i] = d.Chosen
			continue
		}
		alt++
		d.Top[i] = Logprob{TokenID: (chosen + alt) & stampMask, Logprob: rankLogprob(r), Rank: r}
	}
	return d
}

// rankLogprob is the log probability of the token at rank r: -r·ln 2.
func rankLogprob(r uint32) float32 { return float32(-float64(r) * math.Ln2) }
