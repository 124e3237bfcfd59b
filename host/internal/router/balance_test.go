package router

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

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
	p := NewPool(PoolConfig{Rand: seeded(), Balance: LeastOutstanding})
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
	p := NewPool(PoolConfig{Rand: seeded(), Balance: LeastOutstanding})
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
	p := NewPool(PoolConfig{Rand: seeded(), Balance: LeastOutstanding})
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
	p := NewPool(PoolConfig{Rand: seeded(), Balance: LeastOutstanding})
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

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func ttftOf(slow map[string]bool) func(discovery.Registration) time.Duration {
	return func(ep discovery.Registration) time.Duration {
		if slow[ep.WorkerID] {
			return 100 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
}

// serve picks once and plays the worker's part on the fake clock: its
// first message after ttft, then the end of its stream.
func serve(t *testing.T, p *Pool, clock *fakeClock, ttft func(discovery.Registration) time.Duration) discovery.Registration {
	t.Helper()
	ep, _, lease, err := p.PickLease(Ask{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(ttft(ep))
	lease.FirstMessage()
	lease.Release()
	return ep
}

// With the default balance, a worker slow to its first token gets almost
// no requests once measured, even when every worker is idle at each pick
// (where least outstanding would split them evenly): a slow worker's
// requests are what a p99 time to first token is made of.
func TestDefaultBalanceAvoidsSlowWorker(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now})
	defer p.Close()
	eps := fleet(10, "m")
	p.Update(eps)
	slow := map[string]bool{eps[0].WorkerID: true}
	const picks = 2000 // 10 s of the fake clock
	toSlow := 0
	for range picks {
		if ep := serve(t, p, clock, ttftOf(slow)); slow[ep.WorkerID] {
			toSlow++
		}
	}
	// Its first request and few others: at random it would get 10%.
	if share := float64(toSlow) / picks; share > 0.01 {
		t.Errorf("the slow worker got %d of %d requests (%.1f%%), want at most 1%%", toSlow, picks, 100*share)
	}
}

// A worker measured slow once is tried again as its cost decays: 100 ms
// against 5 ms takes ln(20) x DefaultDecay, about 3 s.
func TestPeakEWMADecays(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now, Balance: PeakEWMA})
	defer p.Close()
	eps := fleet(2, "m")
	p.Update(eps)
	slow := map[string]bool{eps[0].WorkerID: true}
	// Measure both.
	for _, ep := range eps {
		_, _, lease, err := p.PickLease(Ask{Model: "m"}, map[string]bool{eps[0].Addr(): ep != eps[0], eps[1].Addr(): ep != eps[1]})
		if err != nil {
			t.Fatal(err)
		}
		clock.advance(ttftOf(slow)(ep))
		lease.FirstMessage()
		lease.Release()
	}
	start := clock.Now()
	want := time.Duration(math.Log(20) * float64(DefaultDecay))
	for clock.Now().Sub(start) < 4*want {
		if ep := serve(t, p, clock, ttftOf(slow)); slow[ep.WorkerID] {
			if after := clock.Now().Sub(start); after < want*8/10 || after > want*12/10 {
				t.Fatalf("the slow worker was tried again after %s, want about %s", after, want)
			}
			return
		}
	}
	t.Fatalf("the slow worker was never tried again within %s", 4*want)
}

// A worker with a request outstanding and no time measured yet costs the
// most: a new worker gets one request, not all of them, until it answers.
func TestPeakEWMANewWorkerGetsOneRequestUntilMeasured(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now, Balance: PeakEWMA})
	defer p.Close()
	eps := fleet(3, "m")
	p.Update(eps[:2])
	for range 20 {
		serve(t, p, clock, ttftOf(nil))
	}
	p.Update(eps)
	// The new worker costs 0 while idle: the first pair with it takes it.
	var held *Lease
	for held == nil {
		ep, _, lease, err := p.PickLease(Ask{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ep.WorkerID == eps[2].WorkerID {
			held = lease
			continue
		}
		clock.advance(5 * time.Millisecond)
		lease.FirstMessage()
		lease.Release()
	}
	for i := range 200 {
		if ep := serve(t, p, clock, ttftOf(nil)); ep.WorkerID == eps[2].WorkerID {
			t.Fatalf("pick %d went to %s, which has not answered its first request yet", i, ep.WorkerID)
		}
	}
	held.Release()
}

// With one worker in ten slow, two random choices both land on slow
// workers in 0.8% of picks, which sets a p99; PeakEWMA's three choices
// make that 0.04%. (A decay of an hour leaves out the re-probes.)
func TestPeakEWMAThreeChoicesAvoidSlowPairs(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now, Balance: PeakEWMA, Decay: time.Hour})
	defer p.Close()
	eps := fleet(40, "m")
	p.Update(eps)
	slow := map[string]bool{}
	for i := 0; i < len(eps); i += 10 {
		slow[eps[i].WorkerID] = true
	}
	for range 400 { // every worker measured
		serve(t, p, clock, ttftOf(slow))
	}
	const picks = 20_000
	toSlow := 0
	for range picks {
		if ep := serve(t, p, clock, ttftOf(slow)); slow[ep.WorkerID] {
			toSlow++
		}
	}
	if share := float64(toSlow) / picks; share > 0.002 {
		t.Errorf("slow workers got %d of %d requests (%.2f%%), want at most 0.2%%", toSlow, picks, 100*share)
	}
}

// A worker whose every attempt fails at once, by a bare status or by an
// error final as its first message, gets no more than its share of 300
// requests among three workers (ingress-nginx #5540): a failure counts as
// a penalty, not as a fast time to first message. Measured on the fake
// clock (1.5 s), it gets its first request and hardly any other.
func TestPeakEWMAFailingWorkerGetsNoMoreThanItsShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first bool // the failure is a first message (a bare error final)
	}{{"status", false}, {"error final", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now})
			defer p.Close()
			eps := fleet(3, "m")
			p.Update(eps)
			failing := eps[0].WorkerID
			const picks = 300
			got := 0
			for range picks {
				ep, _, lease, err := p.PickLease(Ask{Model: "m"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ep.WorkerID == failing {
					got++
					if tc.first {
						lease.FirstMessage()
					}
					lease.Failed()
				} else {
					clock.advance(5 * time.Millisecond)
					lease.FirstMessage()
				}
				lease.Release()
			}
			if got > picks/3 || got > 5 {
				t.Errorf("the failing worker got %d of %d requests, want at most its share (%d), and with the penalty at most 5", got, picks, picks/3)
			}
		})
	}
}

// A failed worker is tried again as its penalty decays, and is back in
// the rotation once it answers: ln(failurePenalty / 5 ms) x DefaultDecay,
// about 8.7 s, after it failed.
func TestPeakEWMAFailedWorkerIsProbedAgain(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := NewPool(PoolConfig{Rand: seeded(), Now: clock.Now})
	defer p.Close()
	eps := fleet(2, "m")
	p.Update(eps)
	_, _, lease, err := p.PickLease(Ask{Model: "m"}, map[string]bool{eps[1].Addr(): true})
	if err != nil {
		t.Fatal(err)
	}
	lease.Failed()
	lease.Release()
	start := clock.Now()
	want := time.Duration(math.Log(failurePenalty/float64(5*time.Millisecond)) * float64(DefaultDecay))
	for clock.Now().Sub(start) < 2*want {
		if ep := serve(t, p, clock, ttftOf(nil)); ep.WorkerID == eps[0].WorkerID {
			if after := clock.Now().Sub(start); after < want*8/10 || after > want*12/10 {
				t.Fatalf("the failed worker was tried again after %s, want about %s", after, want)
			}
			return
		}
	}
	t.Fatalf("the failed worker was never tried again within %s", 2*want)
}
