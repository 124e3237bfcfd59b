package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/bench/internal/stats"
	"github.com/vigilhq/vigil/e2e/harness"
	"google.golang.org/grpc"
)

var (
	// stepIntervals and stepStreams are B5's headline rows: the mock in
	// step mode (--step-interval), every stream in flight getting a token
	// per engine step, as a batching engine's decode step gives.
	stepIntervals = []time.Duration{10 * time.Millisecond, 30 * time.Millisecond}
	stepStreams   = []int{64, 256}
	// streamCounts are the concurrency levels of B5's second table, the
	// mock's per-stream timers (--token-delay).
	streamCounts = []int{1, 16, 64, 256}
	// tokenDelays are the mock's pause between two messages: a realistic
	// decode step, then none, which makes the path's own cost the limit.
	tokenDelays = []time.Duration{10 * time.Millisecond, 0}
)

const (
	// requestTokens is max_tokens of every B5 request.
	requestTokens = 64
	// rowFull and rowQuick are how long each path of a row is measured;
	// stepRowFull for the step rows, whose targets must be met: a longer
	// window, as their CPU ratio varies by about a tenth between windows
	// of 5 s.
	rowFull     = 5 * time.Second
	stepRowFull = 8 * time.Second
	rowQuick    = time.Second
	// rowMaxRequests bounds a row in count as well as time; far above what
	// 5s can send.
	rowMaxRequests = 2_000_000
	// requestTimeout bounds one request: 64 tokens at 10ms take 0.65s.
	requestTimeout = 30 * time.Second
	// ratioTarget and cpuTarget are the step-mode rows' targets: vigil's
	// tokens/s over the direct path's, and vigil's CPU per 1,000 tokens over
	// the reference client's own on the direct path.
	ratioTarget = 0.98
	cpuTarget   = 3.0
	// noDelayRatioTarget is the per-stream-timer rows' target with no token
	// delay at 64 and 256 streams, where the path's own cost is the limit
	// and chunks that wait for a busy hop are merged. Fewer streams have
	// none: a 64-token request then lasts well under a millisecond, so
	// those rows measure each request's set-up through the hops more than
	// the cost per token.
	noDelayRatioTarget = 0.6
	// warmup is a short run on each path before the rows, so that neither
	// path's first row pays for connection set-up and cold code.
	warmup = 300 * time.Millisecond
	// settle is how long a row's measuring window opens after its ramp
	// (one request's length, over which the streams' first requests are
	// spread), so that both paths are measured in their steady state.
	settle = 500 * time.Millisecond
	// lockstepDelay and lockstepStreams are the step row that is run a
	// second time with every stream starting in the same step and
	// measured from the start, as before rows had a ramp: the streams
	// then finish in the same step too, and each path's restart of all of
	// them at once shows.
	lockstepDelay   = 10 * time.Millisecond
	lockstepStreams = 256
	// idleSettle is how long vigil sits registered and idle before its idle
	// memory is read.
	idleSettle = time.Second
	// rssEvery is how often memory is sampled during a 256-stream row.
	rssEvery = 100 * time.Millisecond
)

// pathResult is one path (direct or through vigil) of one row.
type pathResult struct {
	res       load.Result
	ttft      stats.Summary
	mockCPU   time.Duration // the engine's CPU during the path's run
	driverCPU time.Duration // the load generator's (this process's)
	vigilCPU  time.Duration // vigil plus adapter, busy or idle
	hostCPU   time.Duration // of vigilCPU, the vigil process's own
	peakRSS   int64         // vigil plus adapter, when sampled
}

// requestPathRow is one B5 row: both paths at one delay and concurrency.
type requestPathRow struct {
	step          bool // delay is --step-interval, not --token-delay
	delay         time.Duration
	streams       int
	direct, vigil pathResult
	// lockstep is the row run again without a ramp, measured from its
	// start (lockstepDelay and lockstepStreams only): direct, then vigil.
	lockstep *[2]pathResult
}

func (r requestPathRow) ratio() float64 {
	d := r.direct.res.TokensPerSecond()
	if d == 0 {
		return 0
	}
	return r.vigil.res.TokensPerSecond() / d
}

// cpuPer1k is vigil's CPU time per 1,000 tokens it forwarded.
func (r requestPathRow) cpuPer1k() time.Duration { return per1k(r.vigil.vigilCPU, r.vigil.res.Tokens) }

// refCPUPer1k is the reference client's (this process's) CPU per 1,000
// tokens it read on the direct path.
func (r requestPathRow) refCPUPer1k() time.Duration {
	return per1k(r.direct.driverCPU, r.direct.res.Tokens)
}

// cpuRatio is vigil's CPU per 1,000 tokens over the reference client's.
func (r requestPathRow) cpuRatio() float64 {
	ref := r.refCPUPer1k()
	if ref == 0 {
		return 0
	}
	return float64(r.cpuPer1k()) / float64(ref)
}

// peakRSS is vigil's peak memory during the row; 0 when not sampled.
func (r requestPathRow) peakRSS() int64 { return r.vigil.peakRSS }

func per1k(cpu time.Duration, tokens int64) time.Duration {
	if tokens == 0 {
		return 0
	}
	return cpu * 1000 / time.Duration(tokens)
}

// requestPathResult is all of B5, with the idle memory B6 reports.
type requestPathResult struct {
	rows    []requestPathRow
	idleRSS int64
}

func figB5(e *env) ([]report.Row, error) {
	res, err := e.requestPathRows()
	if err != nil {
		return nil, err
	}
	var rows []report.Row
	var step, timer []requestPathRow
	for _, r := range res.rows {
		if r.step {
			step = append(step, r)
			rows = append(rows, b5StepRows(r)...)
		} else {
			timer = append(timer, r)
		}
	}
	for _, r := range timer {
		rows = append(rows, b5Rows(r)...)
	}
	e.sections = append(e.sections,
		b5Section("B5 request path, step mode (headline): "+e.engine.Name, "step interval", step),
		b5Section("B5 request path, per-stream timers: "+e.engine.Name, "token delay", timer))
	hops, err := e.hopLatency()
	if err != nil {
		return append(rows, report.ErrorRow("B5", fmt.Errorf("per-hop latency: %w", err))), nil
	}
	e.sections = append(e.sections, b5HopSection(e.engine.Name, hops))
	return append(rows, b5HopRows(hops)...), nil
}

// b5StepRows are a headline row's figures, with the targets.
func b5StepRows(r requestPathRow) []report.Row {
	name := fmt.Sprintf("step %s, %s", report.Dur(r.delay), streamsName(r.streams))
	errs := ""
	if n := r.direct.res.Errors + r.vigil.res.Errors; n > 0 {
		errs = fmt.Sprintf(" (%d failed requests)", n)
	}
	rows := []report.Row{
		// Four places: a ratio just under its target never prints as
		// meeting it.
		{Figure: "B5", Metric: name + ": tokens/s vigil / direct",
			Value:  fmt.Sprintf("%.0f / %.0f (ratio %.4f)%s", r.vigil.res.TokensPerSecond(), r.direct.res.TokensPerSecond(), r.ratio(), errs),
			Target: fmt.Sprintf("ratio >= %.2f", ratioTarget), Data: rowData(r)},
		{Figure: "B5", Metric: name + ": TTFT p50 vigil / direct",
			Value: fmt.Sprintf("%s / %s", report.Dur(r.vigil.ttft.P50), report.Dur(r.direct.ttft.P50))},
		{Figure: "B5", Metric: name + ": CPU per 1,000 tokens, vigil / reference client direct",
			Value:  fmt.Sprintf("%s / %s (%.1fx)", report.Dur(r.cpuPer1k()), report.Dur(r.refCPUPer1k()), r.cpuRatio()),
			Target: fmt.Sprintf("<= %.0fx", cpuTarget)},
	}
	if l := r.lockstep; l != nil {
		d, v := l[0].res.TokensPerSecond(), l[1].res.TokensPerSecond()
		rows = append(rows, report.Row{Figure: "B5",
			Metric: name + ", all starting in one step, from the start: tokens/s vigil / direct",
			Value:  fmt.Sprintf("%.0f / %.0f (ratio %.4f)", v, d, v/d), Target: "-"})
	}
	return rows
}

func b5Rows(r requestPathRow) []report.Row {
	name := fmt.Sprintf("%s delay, %s", delayName(r.delay), streamsName(r.streams))
	var ratioTarget, cpuTarget string
	switch {
	case r.delay == 10*time.Millisecond && r.streams == 64:
		ratioTarget = "ratio 0.95"
	case r.delay == 0 && r.streams >= 64:
		ratioTarget = fmt.Sprintf("ratio >= %.1f", noDelayRatioTarget)
	}
	cpuTarget = "5 ms"
	errs := ""
	if n := r.direct.res.Errors + r.vigil.res.Errors; n > 0 {
		errs = fmt.Sprintf(" (%d failed requests)", n)
	}
	return []report.Row{
		{Figure: "B5", Metric: name + ": tokens/s vigil / direct",
			Value:  fmt.Sprintf("%.0f / %.0f (ratio %.2f)%s", r.vigil.res.TokensPerSecond(), r.direct.res.TokensPerSecond(), r.ratio(), errs),
			Target: ratioTarget, Data: rowData(r)},
		{Figure: "B5", Metric: name + ": TTFT p50 vigil / direct",
			Value: fmt.Sprintf("%s / %s", report.Dur(r.vigil.ttft.P50), report.Dur(r.direct.ttft.P50))},
		{Figure: "B5", Metric: name + ": vigil CPU per 1,000 tokens",
			Value: report.Dur(r.cpuPer1k()), Target: cpuTarget},
	}
}

func streamsName(n int) string {
	if n == 1 {
		return "1 stream"
	}
	return fmt.Sprintf("%d streams", n)
}

func delayName(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return report.Dur(d)
}

// rowJSON is a B5 row in results.json.
type rowJSON struct {
	StepMode             bool               `json:"step_mode"`
	TokenDelayMs         float64            `json:"token_delay_ms"` // the step interval in step mode
	Streams              int                `json:"streams"`
	DirectTokensPerS     float64            `json:"direct_tokens_per_s"`
	VigilTokensPerS      float64            `json:"vigil_tokens_per_s"`
	Ratio                float64            `json:"ratio"`
	DirectTTFT           report.SummaryData `json:"direct_ttft"`
	VigilTTFT            report.SummaryData `json:"vigil_ttft"`
	VigilCPUMsPer1k      float64            `json:"vigil_cpu_ms_per_1k_tokens"`
	HostCPUMsPer1k       float64            `json:"vigil_host_cpu_ms_per_1k_tokens"` // of VigilCPUMsPer1k, the vigil process's; the rest is the adapter's
	MockCPUMsPer1kDirect float64            `json:"mock_cpu_ms_per_1k_tokens_direct"`
	MockCPUMsPer1kVigil  float64            `json:"mock_cpu_ms_per_1k_tokens_vigil"`
	DriverCPUMsPer1k     [2]float64         `json:"driver_cpu_ms_per_1k_tokens_direct_vigil"`
	Requests             [2]int64           `json:"requests_direct_vigil"`
	Errors               [2]int64           `json:"errors_direct_vigil"`
	FirstError           string             `json:"first_error,omitempty"`
	PeakRSSBytes         int64              `json:"peak_rss_bytes,omitempty"`
	// LockstepTokensPerS is the row without a ramp, from its start.
	LockstepTokensPerS *[2]float64 `json:"lockstep_tokens_per_s_direct_vigil,omitempty"`
	RefCPUMsPer1k      float64     `json:"reference_client_cpu_ms_per_1k_tokens_direct"`
	CPURatio           float64     `json:"cpu_ratio_vigil_reference"`
}

func rowData(r requestPathRow) rowJSON {
	d, v := r.direct, r.vigil
	out := rowJSON{
		StepMode: r.step, TokenDelayMs: report.Ms(r.delay), Streams: r.streams,
		RefCPUMsPer1k: report.Ms(r.refCPUPer1k()), CPURatio: r.cpuRatio(),
		DirectTokensPerS: d.res.TokensPerSecond(), VigilTokensPerS: v.res.TokensPerSecond(), Ratio: r.ratio(),
		DirectTTFT: report.Summary(d.ttft), VigilTTFT: report.Summary(v.ttft),
		VigilCPUMsPer1k:      report.Ms(r.cpuPer1k()),
		HostCPUMsPer1k:       report.Ms(per1k(v.hostCPU, v.res.Tokens)),
		MockCPUMsPer1kDirect: report.Ms(per1k(d.mockCPU, d.res.Tokens)),
		MockCPUMsPer1kVigil:  report.Ms(per1k(v.mockCPU, v.res.Tokens)),
		DriverCPUMsPer1k:     [2]float64{report.Ms(per1k(d.driverCPU, d.res.Tokens)), report.Ms(per1k(v.driverCPU, v.res.Tokens))},
		Requests:             [2]int64{d.res.Requests, v.res.Requests},
		Errors:               [2]int64{d.res.Errors, v.res.Errors},
		PeakRSSBytes:         r.peakRSS(),
	}
	if err := errors.Join(d.res.FirstErr, v.res.FirstErr); err != nil {
		out.FirstError = err.Error()
	}
	if l := r.lockstep; l != nil {
		out.LockstepTokensPerS = &[2]float64{l[0].res.TokensPerSecond(), l[1].res.TokensPerSecond()}
	}
	return out
}

// b5Section is the per-row table of results.md for engine.
func b5Section(title, delayCol string, rows []requestPathRow) report.Section {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | streams | direct tok/s | vigil tok/s | ratio | TTFT p50 / p99 direct | TTFT p50 / p99 vigil | vigil CPU / 1k tok | CPU vigil / reference client | mock CPU / 1k tok direct / vigil | driver CPU / 1k tok direct / vigil | failed |\n", delayCol)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	data := make([]rowJSON, len(rows))
	for i, r := range rows {
		d := rowData(r)
		data[i] = d
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.4f | %s / %s | %s / %s | %s | %.1fx | %s / %s | %s / %s | %d / %d |\n",
			delayName(r.delay), r.streams, d.DirectTokensPerS, d.VigilTokensPerS, d.Ratio,
			report.Dur(r.direct.ttft.P50), report.Dur(r.direct.ttft.P99), report.Dur(r.vigil.ttft.P50), report.Dur(r.vigil.ttft.P99),
			report.Dur(r.cpuPer1k()), r.cpuRatio(),
			report.Dur(per1k(r.direct.mockCPU, r.direct.res.Tokens)), report.Dur(per1k(r.vigil.mockCPU, r.vigil.res.Tokens)),
			report.Dur(per1k(r.direct.driverCPU, r.direct.res.Tokens)), report.Dur(per1k(r.vigil.driverCPU, r.vigil.res.Tokens)),
			d.Errors[0], d.Errors[1])
	}
	return report.Section{
		Title: title,
		Text:  b.String(),
		Data:  data,
		Notes: []string{"Each row runs the direct path, then the vigil path, for the same time against the same engine; " +
			"every stream sends max_tokens 64 requests back to back over one shared client connection per path. " +
			"The streams' first requests are spread evenly over one request's length (64 x the delay), as many clients' load " +
			"reaches an engine, and each path is measured in a window that opens 0.5 s after that ramp and lasts 8 s in step " +
			"mode, 5 s with per-stream timers (1 s with -quick): tok/s counts the tokens received inside it, and CPU per 1,000 tokens divides the CPU time " +
			"(utime+stime, 10 ms ticks) read as it opens and closes by those tokens. " +
			"vigil's is the vigil process plus its adapter child; the mock's and the driver's (the load generator) are shown " +
			"to tell where the shared cores went. The driver is the reference client (bench/internal/load: plain grpc-go " +
			"stream readers, the same loop on both paths), and its CPU on the direct path is what vigil's is compared with. " +
			"In step mode (--step-interval) the mock has one ticker and every stream in flight gets a token per step. " +
			"The 10 ms, 256-stream step row is also run with every stream starting in the same step and measured from the start " +
			"to the end of the last request (the method before the ramp): all 256 then finish in the same step and start again " +
			"at once, and the step each request waits for at that burst shows; its figure has no target."},
	}
}

// requestPathRows runs B5 once for both B5 and B6.
func (e *env) requestPathRows() (*requestPathResult, error) {
	if e.requestPath != nil {
		return e.requestPath, nil
	}
	res := &requestPathResult{}
	for _, step := range stepIntervals {
		rows, _, err := e.requestPathAt(true, step, stepStreams)
		if err != nil {
			return nil, fmt.Errorf("step interval %s: %w", report.Dur(step), err)
		}
		res.rows = append(res.rows, rows...)
	}
	for i, delay := range tokenDelays {
		if e.stepOnly {
			break
		}
		rows, idle, err := e.requestPathAt(false, delay, streamCounts)
		if err != nil {
			return nil, fmt.Errorf("token delay %s: %w", delayName(delay), err)
		}
		if i == 0 {
			res.idleRSS = idle
		}
		res.rows = append(res.rows, rows...)
	}
	e.requestPath = res
	return res, nil
}

// requestPathAt runs each concurrency level against one engine and one
// vigil, and reads vigil's idle memory before the load. step runs the mock
// with --step-interval delay, else with --token-delay delay.
func (e *env) requestPathAt(step bool, delay time.Duration, counts []int) ([]requestPathRow, int64, error) {
	flag := "--token-delay"
	if step {
		flag = "--step-interval"
	}
	m, err := e.startMock("", flag, delay.String())
	if err != nil {
		return nil, 0, err
	}
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return nil, 0, err
	}
	dir, err := e.fileRegistry()
	if err != nil {
		return nil, 0, err
	}
	v, err := e.startVigil(harness.VigilOpts{EngineAddr: m.GRPC, RegistryDir: dir, Service: "llm"})
	if err != nil {
		return nil, 0, err
	}
	defer v.Kill()
	if _, err := v.WaitLine("worker registered", harness.StartTimeout); err != nil {
		return nil, 0, err
	}
	b := &rowBench{e: e, mockPids: []int{m.Pid()}, vigilPids: harness.Tree(v.Pid())}
	if len(b.vigilPids) < 2 {
		return nil, 0, fmt.Errorf("vigil (pid %d) has no adapter child", v.Pid())
	}
	time.Sleep(idleSettle)
	idle, err := harness.RSS(b.vigilPids)
	if err != nil {
		return nil, 0, fmt.Errorf("idle memory: %w", err)
	}
	if b.direct, b.vigil, err = dialBoth(m.GRPC, v.Listen); err != nil {
		return nil, 0, err
	}
	defer b.direct.Close()
	defer b.vigil.Close()
	if err := b.warm(); err != nil {
		return nil, 0, err
	}
	var rows []requestPathRow
	for _, streams := range counts {
		row, err := b.row(step, delay, streams)
		if err != nil {
			return nil, 0, fmt.Errorf("%d streams: %w", streams, err)
		}
		progress("  %s %s, %s: %.0f tok/s via vigil, %.0f direct; CPU/1k tokens vigil %s, reference client %s", flag, delayName(delay), streamsName(streams),
			row.vigil.res.TokensPerSecond(), row.direct.res.TokensPerSecond(), report.Dur(row.cpuPer1k()), report.Dur(row.refCPUPer1k()))
		rows = append(rows, row)
	}
	return rows, idle, nil
}

func dialBoth(direct, vigil string) (*grpc.ClientConn, *grpc.ClientConn, error) {
	d, err := load.Dial(direct)
	if err != nil {
		return nil, nil, err
	}
	v, err := load.Dial(vigil)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, v, nil
}

// rowBench runs the rows against one engine and one vigil.
type rowBench struct {
	e                   *env
	mockPids, vigilPids []int
	direct, vigil       *grpc.ClientConn
}

// warm sends a little traffic on both paths and fails if either path
// fails, so that a broken path is an error rather than a row of zeros.
func (b *rowBench) warm() error {
	cfg := load.Config{Streams: 16, Duration: warmup, MaxRequests: rowMaxRequests, RequestTimeout: requestTimeout, IDPrefix: "warm-"}
	for name, req := range map[string]load.Request{
		"direct": b.e.engine.direct(b.direct, requestTokens),
		"vigil":  load.Worker(b.vigil, requestTokens),
	} {
		res := load.Run(context.Background(), cfg, req)
		if res.Errors > 0 || res.Tokens == 0 {
			return fmt.Errorf("warm-up on the %s path: %d of %d requests failed (first: %v)", name, res.Errors, res.Requests, res.FirstErr)
		}
	}
	return nil
}

// row runs the direct path and then the vigil path for the same time.
func (b *rowBench) row(step bool, delay time.Duration, streams int) (requestPathRow, error) {
	r := requestPathRow{step: step, delay: delay, streams: streams}
	mode := "t"
	if step {
		mode = "s"
	}
	// The streams' first requests spread over one request's length, and
	// the window opens after it: a steady state, in which requests end
	// and start in every step, as on an engine with many clients.
	ramp, window := requestTokens*delay, rowFull
	if step {
		window = stepRowFull
	}
	cfg := load.Config{
		Streams: streams, Duration: ramp + settle + b.e.pick(window, rowQuick),
		Ramp: ramp, Warmup: ramp + settle,
		MaxRequests: rowMaxRequests, RequestTimeout: requestTimeout,
		IDPrefix: fmt.Sprintf("d%s%s-s%d-", mode, delayName(delay), streams),
	}
	r.direct = b.path(cfg, b.e.engine.direct(b.direct, requestTokens), false)
	cfg.IDPrefix = fmt.Sprintf("v%s%s-s%d-", mode, delayName(delay), streams)
	stopProfile := func() error { return nil }
	if step {
		var err error
		name := fmt.Sprintf("b5-%s-step%s-s%d", b.e.engine.Name, strings.ReplaceAll(delayName(delay), " ", ""), streams)
		if stopProfile, err = b.e.prof.start(name, b.vigilPids); err != nil {
			return r, err
		}
	}
	// B6 reads vigil's memory under the heaviest per-stream-timer load.
	r.vigil = b.path(cfg, load.Worker(b.vigil, requestTokens), !step && streams == streamCounts[len(streamCounts)-1])
	if err := stopProfile(); err != nil {
		return r, err
	}
	if r.direct.res.Tokens == 0 || r.vigil.res.Tokens == 0 {
		return r, fmt.Errorf("no tokens (direct: %v; vigil: %v)", r.direct.res.FirstErr, r.vigil.res.FirstErr)
	}
	if step && delay == lockstepDelay && streams == lockstepStreams {
		cfg := load.Config{Streams: streams, Duration: b.e.pick(rowFull, rowQuick), MaxRequests: rowMaxRequests, RequestTimeout: requestTimeout}
		cfg.IDPrefix = fmt.Sprintf("dl%s-s%d-", delayName(delay), streams)
		d := b.path(cfg, b.e.engine.direct(b.direct, requestTokens), false)
		cfg.IDPrefix = fmt.Sprintf("vl%s-s%d-", delayName(delay), streams)
		v := b.path(cfg, load.Worker(b.vigil, requestTokens), false)
		r.lockstep = &[2]pathResult{d, v}
	}
	return r, nil
}

// path runs one path's load and reads the CPU time of the engine, the
// driver and vigil around it; sampleRSS also samples vigil's memory.
// With a measuring window (cfg.Warmup), the CPU times are read as it
// opens and closes, so they cover the tokens it counts.
func (b *rowBench) path(cfg load.Config, req load.Request, sampleRSS bool) pathResult {
	self := []int{os.Getpid()}
	var cpu [2][4]time.Duration
	marks := 0
	read := func() {
		cpu[marks] = [4]time.Duration{harness.CPUTime(b.mockPids), harness.CPUTime(self), harness.CPUTime(b.vigilPids), harness.CPUTime(b.vigilPids[:1])}
		marks++
	}
	if cfg.Warmup > 0 {
		cfg.Mark = read
	} else {
		read()
	}
	var stop func() int64
	if sampleRSS {
		stop = sampleMemory(b.vigilPids)
	}
	res := load.Run(context.Background(), cfg, req)
	var peak int64
	if stop != nil {
		peak = stop()
	}
	if cfg.Warmup == 0 {
		read()
	}
	d := func(i int) time.Duration { return cpu[1][i] - cpu[0][i] }
	return pathResult{res: res, ttft: stats.Summarize(res.TTFT),
		mockCPU: d(0), driverCPU: d(1), vigilCPU: d(2), hostCPU: d(3), peakRSS: peak}
}

// sampleMemory samples the processes' summed RSS every rssEvery until the
// returned function is called, which returns the peak.
func sampleMemory(pids []int) func() int64 {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			if rss, err := harness.RSS(pids); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}
