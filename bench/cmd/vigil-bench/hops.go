package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vigilhq/vigil/bench/internal/load"
	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/bench/internal/stats"
	"github.com/vigilhq/vigil/e2e/harness"
)

const (
	// hopDelay and hopStreams are where the issue sets the per-hop
	// latency target: per-stream timers, 10ms token delay, 64 streams.
	hopDelay   = 10 * time.Millisecond
	hopStreams = 64
	// hopP50Target and hopP99Target bound the latency each hop adds.
	hopP50Target = time.Millisecond
	hopP99Target = 3 * time.Millisecond
)

// hopResult is B5's per-hop latency run.
type hopResult struct {
	res  load.Result
	hops []stats.Summary // load.Hops, in order
	segs []stats.Summary // load.Segments, in order
	// direct is engine→client on the direct path (zero without
	// benchEngine.stamped).
	direct stats.Summary
}

// hopLatency runs the traced vigil path against a mock that stamps its
// tokens with their send time (--stamp-tokens), and summarises each hop's
// latency over every chunk. It has a mock and a vigil of its own, so that
// tracing never touches the rows that measure CPU.
func (e *env) hopLatency() (*hopResult, error) {
	m, err := e.startMock("", "--token-delay", hopDelay.String(), "--stamp-tokens")
	if err != nil {
		return nil, err
	}
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return nil, err
	}
	dir, err := e.fileRegistry()
	if err != nil {
		return nil, err
	}
	v, err := e.startVigil(harness.VigilOpts{EngineAddr: m.GRPC, RegistryDir: dir, Service: "llm"})
	if err != nil {
		return nil, err
	}
	defer v.Kill()
	if _, err := v.WaitLine("worker registered", harness.StartTimeout); err != nil {
		return nil, err
	}
	direct, cc, err := dialBoth(m.GRPC, v.Listen)
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	defer cc.Close()
	req := load.TracedWorker(cc, requestTokens)
	warm := load.Config{Streams: 16, Duration: warmup, MaxRequests: rowMaxRequests, RequestTimeout: requestTimeout, IDPrefix: "warm-"}
	if res := load.Run(context.Background(), warm, req); res.Errors > 0 || res.Tokens == 0 {
		return nil, fmt.Errorf("warm-up of the traced path: %d of %d requests failed (first: %v)", res.Errors, res.Requests, res.FirstErr)
	}
	cfg := load.Config{Streams: hopStreams, Duration: e.pick(rowFull, rowQuick), MaxRequests: rowMaxRequests,
		RequestTimeout: requestTimeout, IDPrefix: "hops-direct-"}
	out := &hopResult{}
	if e.engine.stamped != nil {
		res := load.Run(context.Background(), cfg, e.engine.stamped(direct, requestTokens))
		if res.Errors > 0 || len(res.Paths) == 0 {
			return nil, fmt.Errorf("stamped direct path: %d of %d requests failed (first: %v)", res.Errors, res.Requests, res.FirstErr)
		}
		out.direct = summarizeHops(res.Paths, []load.Hop{load.EngineToClient})[0]
	}
	cfg.IDPrefix = "hops-"
	out.res = load.Run(context.Background(), cfg, req)
	if out.res.Errors > 0 || len(out.res.Paths) == 0 {
		return nil, fmt.Errorf("traced path: %d of %d requests failed, %d chunks traced (first: %v)", out.res.Errors, out.res.Requests, len(out.res.Paths), out.res.FirstErr)
	}
	out.hops = summarizeHops(out.res.Paths, load.Hops)
	out.segs = summarizeHops(out.res.Paths, load.Segments)
	progress("  per-hop latency, %s delay, %d streams: %d chunks traced", report.Dur(hopDelay), hopStreams, len(out.res.Paths))
	return out, nil
}

func summarizeHops(paths []load.Path, hops []load.Hop) []stats.Summary {
	out := make([]stats.Summary, len(hops))
	d := make([]time.Duration, len(paths))
	for i, h := range hops {
		for j, p := range paths {
			d[j] = p.Latency(h)
		}
		out[i] = stats.Summarize(d)
	}
	return out
}

// hopJSON is one hop's latency in results.json.
type hopJSON struct {
	Hop     string             `json:"hop"`
	Latency report.SummaryData `json:"latency"`
}

// b5HopRows are the per-hop latency rows, with the targets.
func b5HopRows(h *hopResult) []report.Row {
	var rows []report.Row
	for i, hop := range load.Hops {
		s := h.hops[i]
		rows = append(rows, report.Row{Figure: "B5",
			Metric: fmt.Sprintf("%s delay, %d streams: latency added, %s, p50 / p99", report.Dur(hopDelay), hopStreams, hop.Name),
			Value:  fmt.Sprintf("%s / %s", report.Dur(s.P50), report.Dur(s.P99)),
			Target: fmt.Sprintf("<= %s / <= %s", report.Dur(hopP50Target), report.Dur(hopP99Target)),
			Data:   hopJSON{Hop: hop.Name, Latency: report.Summary(s)}})
	}
	if d := h.direct; d.N > 0 {
		rows = append(rows, report.Row{Figure: "B5",
			Metric: fmt.Sprintf("%s delay, %d streams: direct path engine→client (one hop, no vigil), p50 / p99", report.Dur(hopDelay), hopStreams),
			Value:  fmt.Sprintf("%s / %s", report.Dur(d.P50), report.Dur(d.P99)),
			Data:   hopJSON{Hop: "direct engine→client", Latency: report.Summary(d)}})
	}
	return rows
}

// b5HopSection splits the path at every stamp.
func b5HopSection(engine string, h *hopResult) report.Section {
	var b strings.Builder
	b.WriteString("| segment | p50 | p99 | max | chunks |\n|---|---|---|---|---|\n")
	data := make([]hopJSON, 0, len(load.Hops)+len(load.Segments))
	for i, hop := range load.Hops {
		s := h.hops[i]
		fmt.Fprintf(&b, "| hop %s | %s | %s | %s | %d |\n", hop.Name, report.Dur(s.P50), report.Dur(s.P99), report.Dur(s.Max), s.N)
		data = append(data, hopJSON{Hop: hop.Name, Latency: report.Summary(s)})
	}
	for i, seg := range load.Segments {
		s := h.segs[i]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d |\n", seg.Name, report.Dur(s.P50), report.Dur(s.P99), report.Dur(s.Max), s.N)
		data = append(data, hopJSON{Hop: seg.Name, Latency: report.Summary(s)})
	}
	if d := h.direct; d.N > 0 {
		fmt.Fprintf(&b, "| direct path engine→client (no vigil) | %s | %s | %s | %d |\n", report.Dur(d.P50), report.Dur(d.P99), report.Dur(d.Max), d.N)
		data = append(data, hopJSON{Hop: "direct engine→client", Latency: report.Summary(d)})
	}
	return report.Section{
		Title: fmt.Sprintf("B5 per-hop latency, per-stream timers (%s delay, %d streams): %s", report.Dur(hopDelay), hopStreams, engine),
		Text:  b.String(),
		Data:  data,
		Notes: []string{"Every chunk's path is stamped: the mock engine sends each token as its send time " +
			"(--stamp-tokens: Unix ns mod 2^31 in the token id, the engines' wire having no field for it), the adapter " +
			"and the host stamp receive and send times into the chunk (trace in vigil.worker.v1.GenerateRequest, " +
			"trace_unix_nano on the chunks; off in every other row), and the reference client takes its receive time. " +
			"All processes run on one machine and stamp with the wall clock (time.Now; a monotonic clock is not " +
			"comparable across processes). A hop runs from the previous hop's send to its own, so its receive, work " +
			"and queueing count; host→client ends at the client's receive. The traced run has its own mock and vigil; " +
			"before it, the same reference client reads the same stamped mock directly for as long (the direct path's one hop)."},
	}
}
