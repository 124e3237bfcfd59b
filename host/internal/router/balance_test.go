package router

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vigilhq/vigil/host/internal/discovery"
)

// fleet is n workers of each model, on distinct loopback ports.
func fleet(n int, models ...string) []discovery.Registration {
	var eps []discovery.Registration
	for mi, m := range models {
		for i := range n {
			eps = append(eps, discovery.Registration{WorkerID: fmt.Sprintf("%s-%d", m, i), Address: "127.0.0.1",
				Port: 1 + mi*n + i, Model: m})
		}
	}
	return eps
}

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// A worker with requests outstanding is passed over for an idle one: with
// two workers both are always the two choices, so every pick goes to the
// idle one while the other holds a request.
func TestLeastOutstandingPrefersLessLoaded(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Rand: seeded()})
	defer p.Close()
	p.Update(fleet(2, "m"))
	busy, _, release, err := p.Pick(Ask{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i := range 100 {
		ep, _, rel, err := p.Pick(Ask{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if ep.WorkerID == busy.WorkerID {
			t.Fatalf("pick %d went to %s, which has a request outstanding, not to the idle worker", i, busy.WorkerID)
		}
	}
	// Outstanding counts to release: once released, the worker is chosen again.
	release()
	seen := map[string]bool{}
	for range 100 {
		ep, _, rel, _ := p.Pick(Ask{Model: "m"}, nil)
		rel()
		seen[ep.WorkerID] = true
	}
	if !seen[busy.WorkerID] {
		t.Errorf("%s was never picked after its request ended", busy.WorkerID)
	}
}

// Of three workers, one holding two requests is never chosen while the
// others hold none: every pair of choices includes an idle worker.
func TestLeastOutstandingAvoidsTheMostLoaded(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Rand: seeded()})
	defer p.Close()
	p.Update(fleet(3, "m"))
	first, _, r1, _ := p.Pick(Ask{Model: "m"}, nil)
	defer r1()
	// A second request to the same worker: retry excludes the others.
	others := map[string]bool{}
	for _, ep := range fleet(3, "m") {
		if ep.WorkerID != first.WorkerID {
			others[ep.Addr()] = true
		}
	}
	second, _, r2, _ := p.Pick(Ask{Model: "m"}, others)
	defer r2()
	if second.WorkerID != first.WorkerID {
		t.Fatalf("tried every other worker, got %s, want %s", second.WorkerID, first.WorkerID)
	}
	for i := range 300 {
		ep, _, rel, _ := p.Pick(Ask{Model: "m"}, nil)
		rel()
		if ep.WorkerID == first.WorkerID {
			t.Fatalf("pick %d went to %s with 2 requests outstanding while two workers were idle", i, ep.WorkerID)
		}
	}
}

// A withdrawn worker is never picked, nor one this request already tried,
// however idle it is.
func TestLeastOutstandingSkipsWithdrawnAndTried(t *testing.T) {
	t.Parallel()
	p := NewPool(PoolConfig{Rand: seeded()})
	defer p.Close()
	eps := fleet(10, "m", "n")
	p.Update(eps)
	// Load every worker of m but m-0, then withdraw m-0: the idle one.
	var releases []func()
	for _, ep := range eps[1:10] {
		tried := map[string]bool{}
		for _, o := range eps[:10] {
			if o.Addr() != ep.Addr() {
				tried[o.Addr()] = true
			}
		}
		_, _, rel, err := p.Pick(Ask{Model: "m"}, tried)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, rel)
	}
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	p.Update(append(eps[1:10:10], eps[10:]...))
	tried := map[string]bool{eps[1].Addr(): true}
	for i := range 1000 {
		ep, _, rel, err := p.Pick(Ask{Model: "m"}, tried)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		switch {
		case ep.WorkerID == eps[0].WorkerID:
			t.Fatalf("pick %d went to withdrawn worker %s", i, ep.WorkerID)
		case tried[ep.Addr()]:
			t.Fatalf("pick %d went to %s, already tried", i, ep.WorkerID)
		case ep.Model != "m":
			t.Fatalf("pick %d went to %s of model %q, want m", i, ep.WorkerID, ep.Model)
		}
	}
}

// Under equal load (every worker alike, requests ending in the order they
// began) the picks spread evenly: the most-picked worker gets close to the
// mean.
func TestLeastOutstandingSpreadsEvenly(t *testing.T) {
	t.Parallel()
	const workers, picks, window = 100, 100_000, 200
	p := NewPool(PoolConfig{Rand: seeded()})
	defer p.Close()
	p.Update(fleet(workers, "m"))
	count := map[string]int{}
	var open []func()
	defer func() {
		for _, rel := range open {
			rel()
		}
	}()
	for range picks {
		ep, _, rel, err := p.Pick(Ask{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		count[ep.WorkerID]++
		if open = append(open, rel); len(open) > window {
			open[0]()
			open = open[1:]
		}
	}
	most := 0
	for _, n := range count {
		most = max(most, n)
	}
	mean := float64(picks) / workers
	if spread := float64(most) / mean; len(count) != workers || spread > 1.06 {
		t.Errorf("%d of %d workers picked, most-loaded/mean = %.3f, want all and <= 1.06", len(count), workers, spread)
	}
}

// BenchmarkPoolPick picks (and releases) among 1,000 workers of 4 models
// from parallel goroutines: the lock's cost under contention.
func BenchmarkPoolPick(b *testing.B) {
	for _, bal := range Balances {
		b.Run(string(bal), func(b *testing.B) {
			p := NewPool(PoolConfig{Balance: bal})
			defer p.Close()
			p.Update(fleet(250, "m0", "m1", "m2", "m3"))
			asks := []Ask{{Model: "m0"}, {Model: "m1"}, {Model: "m2"}, {Model: "m3"}}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					_, _, rel, err := p.Pick(asks[i%4], nil)
					if err != nil {
						b.Fatal(err)
					}
					rel()
					i++
				}
			})
		})
	}
}
