package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/bench/internal/stats"
	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
)

const (
	// routeClients is the concurrency of B7's throughput row.
	routeClients = 64
	// withdrawClients is the concurrency of the withdrawal run. The figure
	// uses send times, and a request reaches the router's pick only after
	// it has waited its turn: at 64 clients on 2 saturated cores that wait
	// is ~20 ms, which would shift every send time early by as much. A
	// few clients keep the wait (reported as the run's latency) to a few
	// milliseconds while still sending about every millisecond.
	withdrawClients = 4
	// routeTokens is max_tokens of B7's requests: one token, so that the
	// router's per-request cost dominates.
	routeTokens = 1
	// shutdownDelay keeps worker 1 admitting after its withdrawal: a
	// request the router still sends it is then served and counted by its
	// engine, not refused and retried elsewhere unseen.
	shutdownDelay = 3 * time.Second
	// afterWithdrawal is how long requests keep flowing once Consul shows
	// worker 1 gone; well inside shutdownDelay.
	afterWithdrawal = 1500 * time.Millisecond
	// routeMaxRequests bounds each B7 run in count.
	routeMaxRequests = 5_000_000
	// routeRunBound bounds the withdrawal run in time, whatever happens.
	routeRunBound = 30 * time.Second
	// withdrawTrialsFull is how many times a worker is withdrawn under
	// traffic, each time from a fresh fleet.
	withdrawTrialsFull = 5
	// withdrawPrefix starts the request ids of the withdrawal run.
	withdrawPrefix = "b7x-"
)

// fleet is two workers behind `vigil route`.
type fleet struct {
	service string
	mocks   [2]*harness.Mock
	vigils  [2]*harness.Vigil
	router  *harness.Router
}

func (f *fleet) kill() {
	if f.router != nil {
		f.router.Kill()
	}
	for i := range 2 {
		if f.vigils[i] != nil {
			f.vigils[i].Kill()
		}
		if f.mocks[i] != nil {
			f.mocks[i].Kill()
		}
	}
}

func figB7(e *env) ([]report.Row, error) {
	var rows []report.Row
	var ws []withdrawal
	for i := range e.trials(withdrawTrialsFull) {
		rps, w, err := fleetTrial(e, i == 0)
		if err != nil {
			return rows, fmt.Errorf("trial %d: %w", i+1, err)
		}
		if i == 0 {
			rows = append(rows, rps)
		}
		ws = append(ws, w)
	}
	e.sections = append(e.sections, withdrawalSection(ws))
	return append(rows, withdrawalRows(ws)...), nil
}

// fleetTrial starts a fleet, measures the router's throughput when
// throughput is set, and withdraws worker 1 under traffic.
func fleetTrial(e *env, throughput bool) (report.Row, withdrawal, error) {
	f := &fleet{service: e.service("route")}
	defer f.kill()
	if err := e.startFleet(f); err != nil {
		return report.Row{}, withdrawal{}, err
	}
	cc, err := load.Dial(f.router.GRPC)
	if err != nil {
		return report.Row{}, withdrawal{}, err
	}
	defer cc.Close()
	var rps report.Row
	if throughput {
		if rps, err = routerThroughput(e, f, cc); err != nil {
			return rps, withdrawal{}, err
		}
	}
	w, err := withdrawalLag(e, f, cc)
	return rps, w, err
}

// startFleet starts two engines with no token delay, a vigil for each
// (the first with a shutdown delay) and the router, and waits until the
// router knows the workers.
func (e *env) startFleet(f *fleet) error {
	for i := range 2 {
		m, err := e.startMock("", "--token-delay", "0")
		if err != nil {
			return err
		}
		f.mocks[i] = m
		opts := harness.VigilOpts{EngineAddr: m.GRPC, Consul: e.consul, Service: f.service}
		if i == 0 {
			opts.Extra = []string{"--shutdown-delay", shutdownDelay.String()}
		}
		if f.vigils[i], err = e.startVigil(opts); err != nil {
			return err
		}
	}
	if _, err := e.consul.WaitPassing(f.service, harness.Count(2), observeTimeout); err != nil {
		return err
	}
	var err error
	if f.router, err = e.h.StartRouter(e.consul, f.service); err != nil {
		return err
	}
	return f.router.WaitWorkers(harness.StartTimeout)
}

// routerThroughput sends single-token requests through the router from
// routeClients clients back to back.
func routerThroughput(e *env, f *fleet, cc *grpc.ClientConn) (report.Row, error) {
	req := load.Worker(cc, routeTokens)
	warm := load.Run(context.Background(), load.Config{Streams: 8, Duration: warmup, MaxRequests: routeMaxRequests,
		RequestTimeout: requestTimeout, IDPrefix: "b7w-"}, req)
	if warm.Errors > 0 {
		return report.Row{}, fmt.Errorf("warm-up through the router: %d of %d requests failed (first: %v)", warm.Errors, warm.Requests, warm.FirstErr)
	}
	before, err := engineTotals(f)
	if err != nil {
		return report.Row{}, err
	}
	res := load.Run(context.Background(), load.Config{Streams: routeClients, Duration: e.pick(rowFull, rowQuick),
		MaxRequests: routeMaxRequests, RequestTimeout: requestTimeout, IDPrefix: "b7r-"}, req)
	after, err := engineTotals(f)
	if err != nil {
		return report.Row{}, err
	}
	share := [2]int{after[0] - before[0], after[1] - before[1]}
	progress("  %.0f requests/s through the router (engines got %d and %d)", res.RequestsPerSecond(), share[0], share[1])
	value := fmt.Sprintf("%.0f", res.RequestsPerSecond())
	if res.Errors > 0 {
		value += fmt.Sprintf(" (%d of %d failed: %v)", res.Errors, res.Requests, res.FirstErr)
	}
	return report.Row{Figure: "B7",
		Metric: fmt.Sprintf("requests/s through vigil route, %d clients, 2 workers, max_tokens 1, token delay 0", routeClients),
		Value:  value,
		Data: map[string]any{"requests_per_s": res.RequestsPerSecond(), "requests": res.Requests, "errors": res.Errors,
			"engine_share": share, "seconds": res.Elapsed.Seconds()}}, nil
}

func engineTotals(f *fleet) ([2]int, error) {
	var out [2]int
	for i, m := range f.mocks {
		st, err := m.State()
		if err != nil {
			return out, err
		}
		out[i] = st.RequestsTotal
	}
	return out, nil
}

// withdrawal is what the withdrawal run measured.
type withdrawal struct {
	sigterm, withdrawn, lastSent time.Time
	// dropped is when the router logged worker 1 leaving its pool: the
	// router's own view, independent of the send-time resolution.
	dropped time.Time
	// lateRequests were sent after the withdrawal and still reached
	// worker 1.
	lateRequests int
	requests     int64
	errors       int64
	// gap is the mean time between two sends of the run, and latency the
	// median time from send to the (single) token: the figure's resolution
	// and how late after its send a request may have been picked.
	gap, latency time.Duration
}

// lag is the figure: the last send to worker 1 after its withdrawal, 0
// when that send came before it.
func (w withdrawal) lag() time.Duration { return max(0, w.lastSent.Sub(w.withdrawn)) }

// withdrawalRows summarise the trials: the figure, then the readings that
// tell how to read it (unclamped, the router's own log, vigil's part).
func withdrawalRows(ws []withdrawal) []report.Row {
	pick := func(f func(withdrawal) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ws))
		for i, w := range ws {
			out[i] = f(w)
		}
		return out
	}
	return []report.Row{
		report.SummaryRow("B7", "worker withdrawn from Consul→last request the router sent it (send time, clamped at 0)",
			pick(withdrawal.lag), "20 ms"),
		report.SummaryRow("B7", "the same, unclamped (negative: sent before the withdrawal)",
			pick(func(w withdrawal) time.Duration { return w.lastSent.Sub(w.withdrawn) }), ""),
		report.SummaryRow("B7", "withdrawn from Consul→router logged dropping the worker",
			pick(func(w withdrawal) time.Duration { return w.dropped.Sub(w.withdrawn) }), ""),
		report.SummaryRow("B7", "SIGTERM of worker 1 (--shutdown-delay 3s)→withdrawn from Consul",
			pick(func(w withdrawal) time.Duration { return w.withdrawn.Sub(w.sigterm) }), ""),
	}
}

// withdrawalSection is the per-trial table of results.md.
func withdrawalSection(ws []withdrawal) report.Section {
	var b strings.Builder
	b.WriteString("| trial | SIGTERM→withdrawn | last send to worker 1 − withdrawal | router log − withdrawal | " +
		"sends after the withdrawal that reached worker 1 | mean send gap | latency p50 | requests | failed |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, w := range ws {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %d | %s | %s | %d | %d |\n", i+1,
			report.Dur(w.withdrawn.Sub(w.sigterm)), report.Dur(w.lastSent.Sub(w.withdrawn)), report.Dur(w.dropped.Sub(w.withdrawn)),
			w.lateRequests, report.Dur(w.gap), report.Dur(w.latency), w.requests, w.errors)
	}
	return report.Section{
		Title: "B7 withdrawal trials",
		Text:  b.String(),
		Notes: []string{fmt.Sprintf("Each trial starts a fresh fleet (two engines with no token delay, two vigils, `vigil route`), "+
			"sends max_tokens 1 requests through the router from %d clients, SIGTERMs vigil 1 (which withdraws at once and "+
			"keeps admitting for its 3 s shutdown delay), and stops sending %s after Consul showed it gone. The withdrawal time "+
			"comes from an observer process of its own on a blocking query; worker 1's last request is found among its engine's "+
			"request ids. Send times precede the router's pick by part of the request latency, and the router's log time is "+
			"taken just after its pool changed.", withdrawClients, afterWithdrawal)},
	}
}

// withdrawalLag keeps requests flowing through the router while worker 1
// is withdrawn, then finds the last request the router sent it among its
// engine's request ids.
func withdrawalLag(e *env, f *fleet, cc *grpc.ClientConn) (withdrawal, error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	results := make(chan load.Result, 1)
	go func() {
		results <- load.Run(ctx, load.Config{Streams: withdrawClients, Duration: routeRunBound, MaxRequests: routeMaxRequests,
			RequestTimeout: requestTimeout, IDPrefix: withdrawPrefix, RecordSends: true}, load.Worker(cc, routeTokens))
	}()
	w, err := withdrawWorker1(e, f, e.pick(time.Second, 500*time.Millisecond))
	stop()
	res := <-results
	if err != nil {
		return w, err
	}
	w.requests, w.errors, w.latency = res.Requests, res.Errors, stats.Summarize(res.TTFT).P50
	if res.Requests > 0 {
		w.gap = res.Elapsed / time.Duration(res.Requests)
	}
	st, err := f.mocks[0].State()
	if err != nil {
		return w, err
	}
	last := -1
	for id := range st.Requests {
		if seq, ok := withdrawSeq(id); ok && seq < len(res.Sends) {
			last = max(last, seq)
			if res.Sends[seq].After(w.withdrawn) {
				w.lateRequests++
			}
		}
	}
	if last < 0 {
		return w, fmt.Errorf("worker 1's engine got none of the %d requests of the withdrawal run", res.Requests)
	}
	w.lastSent = res.Sends[last]
	return w, nil
}

// withdrawWorker1 lets traffic settle, SIGTERMs vigil 1, waits until
// Consul drops it, and lets traffic run on for afterWithdrawal.
func withdrawWorker1(e *env, f *fleet, settle time.Duration) (withdrawal, error) {
	var w withdrawal
	time.Sleep(settle)
	obs, err := e.observeWithdrawal(f.service, f.vigils[0].WorkerID)
	if err != nil {
		return w, err
	}
	defer obs.Kill()
	w.sigterm = time.Now()
	if err := f.vigils[0].Signal(syscall.SIGTERM); err != nil {
		return w, err
	}
	if w.withdrawn, err = withdrawnAt(obs); err != nil {
		return w, fmt.Errorf("observing worker 1's withdrawal: %w", err)
	}
	if w.dropped, err = f.router.LoggedAt("worker left discovery", observeTimeout); err != nil {
		return w, err
	}
	time.Sleep(time.Until(w.withdrawn.Add(afterWithdrawal)))
	return w, nil
}

func hasWorker(entries []*api.ServiceEntry, workerID string) bool {
	for _, e := range entries {
		if e.Service.Meta["worker_id"] == workerID {
			return true
		}
	}
	return false
}

// withdrawSeq reads the client sequence number from an engine request id,
// which vigil forms as "<client id>-<n>" from the client's "b7x-<seq>".
func withdrawSeq(engineID string) (int, bool) {
	rest, ok := strings.CutPrefix(engineID, withdrawPrefix)
	if !ok {
		return 0, false
	}
	seq, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(seq)
	return n, err == nil
}
