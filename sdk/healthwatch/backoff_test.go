package healthwatch_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigilhq/vigil/sdk/healthwatch"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	noJitter := healthwatch.Backoff{Base: 10 * time.Millisecond, Max: 250 * time.Millisecond, Factor: 2}
	tests := map[string]struct {
		b       healthwatch.Backoff
		retries []int
		want    []time.Duration
	}{
		"zero value": {
			b:       healthwatch.Backoff{},
			retries: []int{0, 1, 1e6},
			want:    []time.Duration{0, 0, 0},
		},
		"grows from Base by Factor": {
			b:       noJitter,
			retries: []int{0, 1, 2, 3, 4},
			want:    []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond},
		},
		"capped at Max": {
			b:       noJitter,
			retries: []int{5, 6, 100},
			want:    []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond},
		},
		"huge retry counts stay at Max": {
			b:       noJitter,
			retries: []int{1e6, math.MaxInt32, math.MaxInt},
			want:    []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond},
		},
		"negative retries count as the first": {
			b:       noJitter,
			retries: []int{-1, math.MinInt},
			want:    []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
		},
		"Base above Max is Max": {
			b:       healthwatch.Backoff{Base: time.Second, Max: 250 * time.Millisecond, Factor: 2},
			retries: []int{0, 1e6},
			want:    []time.Duration{250 * time.Millisecond, 250 * time.Millisecond},
		},
		// A constant backoff: the delay never reaches Max, so nothing stops
		// early; a huge retry count must still answer at once.
		"Factor 1 stays at Base for any retry count": {
			b:       healthwatch.Backoff{Base: 10 * time.Millisecond, Max: time.Second, Factor: 1},
			retries: []int{0, 1, 1e6, math.MaxInt},
			want:    []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
		},
		"fractional Factor": {
			b:       healthwatch.Backoff{Base: 8 * time.Millisecond, Max: time.Second, Factor: 1.5},
			retries: []int{0, 1, 2, 3},
			want:    []time.Duration{8 * time.Millisecond, 12 * time.Millisecond, 18 * time.Millisecond, 27 * time.Millisecond},
		},
		"DefaultBackoff without jitter": {
			b:       withoutJitter(healthwatch.DefaultBackoff(250 * time.Millisecond)),
			retries: []int{0, 4, 5, 1e6},
			want:    []time.Duration{10 * time.Millisecond, 160 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := make([]time.Duration, len(tt.retries))
			for i, r := range tt.retries {
				got[i] = tt.b.Delay(r)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%+v.Delay(%v) mismatch (-want +got):\n%s", tt.b, tt.retries, diff)
			}
		})
	}
}

// TestBackoffDelayJitter draws many delays and checks each stays within
// [d*(1-Jitter), d], where d is the delay without jitter, and never above Max.
func TestBackoffDelayJitter(t *testing.T) {
	t.Parallel()
	tests := map[string]healthwatch.Backoff{
		"DefaultBackoff(250ms)": healthwatch.DefaultBackoff(250 * time.Millisecond),
		"DefaultBackoff(1s)":    healthwatch.DefaultBackoff(time.Second),
		"full jitter":           {Base: 10 * time.Millisecond, Max: 100 * time.Millisecond, Factor: 2, Jitter: 1},
		"small jitter":          {Base: time.Millisecond, Max: 50 * time.Millisecond, Factor: 3, Jitter: 0.01},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			exact := withoutJitter(b)
			for _, retries := range []int{0, 1, 2, 3, 5, 8, 13, 100, 1e6, math.MaxInt} {
				d := exact.Delay(retries)
				// Durations are whole nanoseconds: allow 1ns of rounding
				// below the exact bound.
				lo := time.Duration(float64(d)*(1-b.Jitter)) - 1
				for range 200 {
					got := b.Delay(retries)
					if got < lo || got > d {
						t.Fatalf("Delay(%d) = %v, want within [%v, %v]", retries, got, lo, d)
					}
					if got > b.Max {
						t.Fatalf("Delay(%d) = %v, want at most Max %v", retries, got, b.Max)
					}
				}
			}
		})
	}
}

func withoutJitter(b healthwatch.Backoff) healthwatch.Backoff {
	b.Jitter = 0
	return b
}
