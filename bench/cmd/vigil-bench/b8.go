package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/bench/internal/stats"
	"github.com/vigilhq/vigil/e2e/harness"
)

const (
	b8WorkersFull, b8WorkersQuick = 1000, 100
	// b8ChurnEvery: each tick deregisters one registered stand-in and
	// registers one withdrawn at least b8ReturnAfter ago, so 20
	// withdrawals and 20 registrations a second.
	b8ChurnEvery  = 50 * time.Millisecond
	b8ReturnAfter = time.Second
	b8ChurnFull   = 20 * time.Second
	b8ChurnQuick  = 2 * time.Second
	// b8Clients send one-token requests through the router during the
	// churn and the spread run.
	b8Clients                   = 16
	b8SpreadFull, b8SpreadQuick = 100_000, 5_000
	// The mixed fleets: one stand-in in 10, then one in 20, takes
	// 20 times as long to its first token as the others.
	b8MixWorkersFull, b8MixWorkersQuick = 40, 40
	b8FastTTFT, b8SlowTTFT              = 5 * time.Millisecond, 100 * time.Millisecond
	b8MixClients                        = 64
	b8MixFull, b8MixQuick               = 10 * time.Second, time.Second
	// b8Bound bounds every load run of B8 in time.
	b8Bound = 120 * time.Second
)

var b8Models = []string{"b8-m0", "b8-m1", "b8-m2", "b8-m3"}

// withdrawalEvent is one deregistration of B8's churn.
type withdrawalEvent struct {
	w *standIn
	// at is just before the deregistration was sent to Consul.
	at time.Time
	// lastRecv is the stand-in's last request received, read when it
	// registers again (or at the end of the churn), at returned.
	lastRecv, returned time.Time
}

func figB8(e *env) ([]report.Row, error) {
	n := b8WorkersFull
	if e.quick {
		n = b8WorkersQuick
	}
	f, err := registeredFleet(e, "fleet", n, b8Models, func(int) time.Duration { return 0 })
	if err != nil {
		return nil, err
	}
	defer f.close()
	r, err := e.h.StartRouter(e.consul, f.service)
	if err != nil {
		return nil, err
	}
	defer r.Kill()
	if err := r.WaitCount("worker joined", n, observeTimeout); err != nil {
		return nil, err
	}
	idle, err := harness.RSS([]int{r.Pid()})
	if err != nil {
		return nil, err
	}
	cc, err := load.Dial(r.GRPC)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	req := modelRequests(cc, b8Models)

	rows, joined, err := b8Churn(e, f, r, req, idle)
	if err != nil {
		return nil, err
	}
	// Spread: every stand-in alike, peak-ewma (the default).
	if err := r.WaitCount("worker joined", joined, observeTimeout); err != nil {
		return rows, err
	}
	spread, err := b8Spread(e, f, req)
	if err != nil {
		return rows, err
	}
	rows = append(rows, spread)

	for _, every := range []int{10, 20} {
		mix, err := b8Mix(e, every)
		if rows = append(rows, mix...); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// registeredFleet starts n stand-ins for e's service name (see
// startStandIns), registers them all and waits until Consul lists them
// passing. The caller closes it.
func registeredFleet(e *env, name string, n int, models []string, ttft func(i int) time.Duration) (*standInFleet, error) {
	f, err := startStandIns(e.consul.Client.Agent(), e.service(name), n, models, ttft)
	if err != nil {
		return nil, err
	}
	if err := f.each(f.workers, f.register); err != nil {
		f.close()
		return nil, err
	}
	if _, err := e.consul.WaitPassing(f.service, harness.Count(n), observeTimeout); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// b8Churn measures the router r in front of f while f's stand-ins churn
// under load: how soon it drops a withdrawn worker, seen from an observer
// process of its own, and its CPU and memory (idle: before the churn).
// joined is how many "worker joined" lines r has logged once every
// withdrawn stand-in is back.
func b8Churn(e *env, f *standInFleet, r *harness.Router, req load.Request, idle int64) (rows []report.Row, joined int, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("finding the driver's executable: %w", err)
	}
	obs, err := e.h.Start("observer", nil, self, observeChurnCmd, "-consul", e.consul.Addr, "-service", f.service,
		"-for", (b8Bound + observeTimeout).String())
	if err != nil {
		return nil, 0, err
	}
	defer obs.Kill()
	if _, err := obs.WaitLine("armed", harness.StartTimeout); err != nil {
		return nil, 0, err
	}
	n := len(f.workers)
	// Every connection used once (the first use of one allocates its
	// buffers) before the churn, which measures the router settled.
	load.Run(context.Background(), load.Config{Streams: b8Clients, Duration: b8Bound, MaxRequests: int64(5 * n),
		RequestTimeout: requestTimeout, IDPrefix: "b8u-"}, req)
	m, err := churnUnderLoad(e, f, r, req)
	if err != nil {
		return nil, 0, err
	}
	dropped, err := droppedTimes(r.Output())
	if err != nil {
		return nil, 0, err
	}
	gone, _ := goneTimes(obs.Output())
	l := withdrawalLags(m.events, dropped, gone)
	if l.unseen+l.missed > 0 {
		progress("  of %d withdrawals the observer missed %d, the router %d", len(m.events), l.unseen, l.missed)
	}
	// A worker gone and back between two of the router's answers never
	// left its pool, nor joined again.
	return b8ChurnRows(n, m, l, idle), n + m.regs - l.missed, nil
}

// b8ChurnRun is what churnUnderLoad measured.
type b8ChurnRun struct {
	events       []*withdrawalEvent
	regs         int // registrations
	res          load.Result
	cpu, elapsed time.Duration // the router's CPU time, in elapsed
	peak         int64         // the router's peak VmRSS
}

// churnUnderLoad churns f (see churn) while b8Clients send requests
// through r, sampling r's CPU time and peak memory meanwhile; any failed
// request fails it.
func churnUnderLoad(e *env, f *standInFleet, r *harness.Router, req load.Request) (b8ChurnRun, error) {
	pid := r.Pid()
	var peak peakRSS
	stopPeak := peak.sample(pid)
	cpu0, began := harness.CPUTime([]int{pid}), time.Now()
	ctx, stop := context.WithCancel(context.Background())
	results := make(chan load.Result, 1)
	go func() {
		results <- load.Run(ctx, load.Config{Streams: b8Clients, Duration: b8Bound, MaxRequests: routeMaxRequests,
			RequestTimeout: requestTimeout, IDPrefix: "b8c-"}, req)
	}()
	events, regs, churnErr := churn(f, e.pick(b8ChurnFull, b8ChurnQuick))
	if churnErr == nil {
		// Every withdrawal, unless gone and back between two answers.
		_ = r.WaitCount("worker left discovery", len(events), 5*time.Second)
	}

	stop()
	res := <-results
	cpu, elapsed := harness.CPUTime([]int{pid})-cpu0, time.Since(began)
	stopPeak()
	if churnErr != nil {
		return b8ChurnRun{}, churnErr
	}
	if res.Errors > 0 {
		return b8ChurnRun{}, fmt.Errorf("churn: %d of %d requests through the router failed (first: %v)", res.Errors, res.Requests, res.FirstErr)
	}
	return b8ChurnRun{events: events, regs: regs, res: res, cpu: cpu, elapsed: elapsed, peak: peak.max()}, nil
}

// b8Lags are the delays of the churn's withdrawals, and how many of them
// the observer (unseen) and the router (missed) never saw.
type b8Lags struct {
	seenDropped, sentDropped, sentSeen, seenRecv []time.Duration
	unseen, missed                               int
}

// withdrawalLags times each withdrawal, up to the stand-in's next one,
// against the router's log (dropped, by address) and the observer's
// (gone, by worker id).
func withdrawalLags(events []*withdrawalEvent, dropped, gone map[string][]time.Time) b8Lags {
	var l b8Lags
	for i, ev := range events {
		end := time.Now()
		for _, later := range events[i+1:] {
			if later.w == ev.w {
				end = later.at
				break
			}
		}
		drop, wasDropped := within(dropped[ev.w.addr], ev.at, end)
		left, seen := within(gone[ev.w.id], ev.at, end)
		if !wasDropped {
			// The router never saw it leave: it chose it until it returned.
			drop = ev.returned
			l.missed++
		}
		l.sentDropped = append(l.sentDropped, drop.Sub(ev.at))
		if !seen {
			// Gone and back between two of the observer's answers.
			l.unseen++
			continue
		}
		l.seenDropped = append(l.seenDropped, max(0, drop.Sub(left)))
		l.sentSeen = append(l.sentSeen, left.Sub(ev.at))
		l.seenRecv = append(l.seenRecv, max(0, ev.lastRecv.Sub(left)))
	}
	return l
}

// b8ChurnRows are the churn's figures, for n workers.
func b8ChurnRows(n int, m b8ChurnRun, l b8Lags, idle int64) []report.Row {
	desc := fmt.Sprintf("%d workers, %d models, %d deregistrations + %d registrations/s, %d clients",
		n, len(b8Models), time.Second/b8ChurnEvery, time.Second/b8ChurnEvery, b8Clients)
	return []report.Row{
		report.SummaryRow("B8", "withdrawn (deregistration seen in Consul)→router dropped the worker (no pick after it), "+desc,
			l.seenDropped, "p99 50 ms"),
		{Figure: "B8", Metric: "withdrawals not seen in Consul's passing list by the observer / by the router (gone and back within 1 s)",
			Value: fmt.Sprintf("%d / %d of %d", l.unseen, l.missed, len(m.events)),
			Data:  map[string]any{"observer_missed": l.unseen, "router_missed": l.missed, "withdrawals": len(m.events)}},
		report.SummaryRow("B8", "withdrawn→last request the withdrawn worker received (0: none after)", l.seenRecv, ""),
		report.SummaryRow("B8", "deregistration sent→seen in Consul (observer process, blocking query)", l.sentSeen, ""),
		report.SummaryRow("B8", "deregistration sent→router dropped the worker", l.sentDropped, ""),
		{Figure: "B8", Metric: fmt.Sprintf("router CPU during the churn, %.0f requests/s", m.res.RequestsPerSecond()),
			Value: fmt.Sprintf("%.1f%% of a core (%s in %s)", 100*m.cpu.Seconds()/m.elapsed.Seconds(), report.Dur(m.cpu), report.Dur(m.elapsed)),
			Data: map[string]any{"cpu_s": m.cpu.Seconds(), "elapsed_s": m.elapsed.Seconds(), "requests": m.res.Requests,
				"withdrawals": len(m.events), "registrations": m.regs}},
		{Figure: "B8", Metric: fmt.Sprintf("router memory (VmRSS) with %d workers", n),
			Value: fmt.Sprintf("idle %s, peak during the churn %s", mb(idle), mb(m.peak)),
			Data:  map[string]any{"idle_bytes": idle, "peak_bytes": m.peak}},
	}
}

// churn deregisters a random registered stand-in every b8ChurnEvery for d,
// and registers again each one withdrawn b8ReturnAfter ago, then the
// rest once d is over.
func churn(f *standInFleet, d time.Duration) (events []*withdrawalEvent, regs int, err error) {
	rnd := rand.New(rand.NewPCG(8, 8))
	var out []*withdrawalEvent // withdrawn, in order
	in := make([]*standIn, len(f.workers))
	copy(in, f.workers)
	back := func(ev *withdrawalEvent) error {
		ev.lastRecv, ev.returned = time.Unix(0, ev.w.lastRecv.Load()), time.Now()
		in = append(in, ev.w)
		regs++
		return f.register(ev.w)
	}
	t := time.NewTicker(b8ChurnEvery)
	defer t.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-t.C {
		i := rnd.IntN(len(in))
		ev := &withdrawalEvent{w: in[i]}
		in[i] = in[len(in)-1]
		in = in[:len(in)-1]
		ev.at = time.Now()
		if err := f.deregister(ev.w); err != nil {
			return events, regs, err
		}
		events, out = append(events, ev), append(out, ev)
		if time.Since(out[0].at) >= b8ReturnAfter {
			if err := back(out[0]); err != nil {
				return events, regs, err
			}
			out = out[1:]
		}
	}
	// Let the router's picks reach the last withdrawn before reading them.
	time.Sleep(b8ReturnAfter)
	for _, ev := range out {
		if err := back(ev); err != nil {
			return events, regs, err
		}
	}
	return events, regs, nil
}

// within is the first of ts (in order) from a little before from (the
// clocks of two processes) and before to.
func within(ts []time.Time, from, to time.Time) (time.Time, bool) {
	for _, t := range ts {
		if !t.Before(from.Add(-5*time.Millisecond)) && t.Before(to) {
			return t, true
		}
	}
	return time.Time{}, false
}

// droppedTimes reads the router's JSON log: the times it dropped each
// worker address, in order.
func droppedTimes(output string) (map[string][]time.Time, error) {
	out := map[string][]time.Time{}
	for _, line := range strings.Split(output, "\n") {
		if !strings.Contains(line, "worker left discovery") {
			continue
		}
		var rec struct {
			Timestamp time.Time `json:"@timestamp"`
			Addr      string    `json:"addr"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("router log line %q: %w", line, err)
		}
		out[rec.Addr] = append(out[rec.Addr], rec.Timestamp)
	}
	return out, nil
}

// b8Spread sends b8SpreadFull requests through the router and reports how
// many the most loaded stand-in got against the mean.
func b8Spread(e *env, f *standInFleet, req load.Request) (report.Row, error) {
	total := int64(b8SpreadFull)
	if e.quick {
		total = b8SpreadQuick
	}
	before := make([]int64, len(f.workers))
	for i, w := range f.workers {
		before[i] = w.requests.Load()
	}
	res := load.Run(context.Background(), load.Config{Streams: b8Clients, Duration: b8Bound, MaxRequests: total,
		RequestTimeout: requestTimeout, IDPrefix: "b8s-"}, req)
	if res.Errors > 0 {
		return report.Row{}, fmt.Errorf("spread: %d of %d requests failed (first: %v)", res.Errors, res.Requests, res.FirstErr)
	}
	var most, sum int64
	for i, w := range f.workers {
		d := w.requests.Load() - before[i]
		most, sum = max(most, d), sum+d
	}
	mean := float64(sum) / float64(len(f.workers))
	spread := float64(most) / mean
	progress("  spread over %d requests: most-loaded %d, mean %.1f, %.3f", sum, most, mean, spread)
	return report.Row{Figure: "B8",
		Metric: fmt.Sprintf("most-loaded/mean requests per worker over %d requests, %d workers alike, --balance peak-ewma (the default)", sum, len(f.workers)),
		Value:  fmt.Sprintf("%.3f (most %d, mean %.1f, %.0f requests/s)", spread, most, mean, res.RequestsPerSecond()),
		Data:   map[string]any{"spread": spread, "most": most, "mean": mean, "requests": sum}}, nil
}

// b8Mix runs the mixed fleet behind a router of each balance and reports
// the time to first token.
func b8Mix(e *env, slowEvery int) ([]report.Row, error) {
	n := b8MixWorkersFull
	if e.quick {
		n = b8MixWorkersQuick
	}
	f, err := registeredFleet(e, "mix", n, []string{"b8-mix"}, func(i int) time.Duration {
		if i%slowEvery == 0 {
			return b8SlowTTFT
		}
		return b8FastTTFT
	})
	if err != nil {
		return nil, err
	}
	defer f.close()
	var rows []report.Row
	p99 := map[string]time.Duration{}
	for _, bal := range []string{"peak-ewma", "least-outstanding", "round-robin"} {
		row, d, err := b8MixRun(e, f, bal, slowEvery)
		if err != nil {
			return rows, fmt.Errorf("--balance %s: %w", bal, err)
		}
		p99[bal] = d
		rows = append(rows, row)
	}
	rows[0].Target = "below round-robin's p99"
	progress("  time to first token p99: peak-ewma %s, least-outstanding %s, round-robin %s",
		report.Dur(p99["peak-ewma"]), report.Dur(p99["least-outstanding"]), report.Dur(p99["round-robin"]))
	return rows, nil
}

func b8MixRun(e *env, f *standInFleet, balance string, slowEvery int) (report.Row, time.Duration, error) {
	r, err := e.h.StartRouterArgs(e.consul, f.service, "--balance", balance)
	if err != nil {
		return report.Row{}, 0, err
	}
	defer r.Kill()
	if err := r.WaitCount("worker joined", len(f.workers), observeTimeout); err != nil {
		return report.Row{}, 0, err
	}
	cc, err := load.Dial(r.GRPC)
	if err != nil {
		return report.Row{}, 0, err
	}
	defer cc.Close()
	req := modelRequests(cc, []string{"b8-mix"})
	load.Run(context.Background(), load.Config{Streams: b8MixClients, Duration: warmup, MaxRequests: routeMaxRequests,
		RequestTimeout: requestTimeout, IDPrefix: "b8w-"}, req)
	before := make([]int64, len(f.workers))
	for i, w := range f.workers {
		before[i] = w.requests.Load()
	}
	res := load.Run(context.Background(), load.Config{Streams: b8MixClients, Duration: e.pick(b8MixFull, b8MixQuick),
		MaxRequests: routeMaxRequests, RequestTimeout: requestTimeout, IDPrefix: "b8m-"}, req)
	if res.Errors > 0 {
		return report.Row{}, 0, fmt.Errorf("%d of %d requests failed (first: %v)", res.Errors, res.Requests, res.FirstErr)
	}
	var slow, all int64
	for i, w := range f.workers {
		d := w.requests.Load() - before[i]
		all += d
		if w.ttft == b8SlowTTFT {
			slow += d
		}
	}
	s := stats.Summarize(res.TTFT)
	sorted := append([]time.Duration(nil), res.TTFT...)
	slices.Sort(sorted)
	p95 := stats.Percentile(sorted, 95)
	share := float64(slow) / float64(max(all, 1))
	row := report.Row{Figure: "B8",
		Metric: fmt.Sprintf("time to first token, %d workers (1 in %d slow: %s vs %s), %d clients, --balance %s (n=%d)",
			len(f.workers), slowEvery, report.Dur(b8SlowTTFT), report.Dur(b8FastTTFT), b8MixClients, balance, s.N),
		Value: fmt.Sprintf("p50 %s, p95 %s, p99 %s, max %s; %.1f%% of requests to slow workers; %.0f requests/s",
			report.Dur(s.P50), report.Dur(p95), report.Dur(s.P99), report.Dur(s.Max), 100*share, res.RequestsPerSecond()),
		Data: map[string]any{"p50_ms": report.Ms(s.P50), "p95_ms": report.Ms(p95), "p99_ms": report.Ms(s.P99),
			"max_ms": report.Ms(s.Max), "slow_share": share, "requests": res.Requests, "requests_per_s": res.RequestsPerSecond()}}
	return row, s.P99, nil
}

// peakRSS samples a process's VmRSS every 100 ms and keeps the largest.
type peakRSS struct {
	mu   sync.Mutex
	peak int64
}

func (p *peakRSS) sample(pid int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, err := harness.RSS([]int{pid}); err == nil {
				p.mu.Lock()
				p.peak = max(p.peak, rss)
				p.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (p *peakRSS) max() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}
