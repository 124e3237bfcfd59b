package main

import (
	"fmt"

	"github.com/vigilhq/vigil/bench/internal/report"
)

// mb is a byte count in MB (10^6 bytes, the unit of the target).
func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func figB6(e *env) ([]report.Row, error) {
	rp, err := e.requestPathRows()
	if err != nil {
		return nil, fmt.Errorf("memory readings come from B5's run: %w", err)
	}
	rows := []report.Row{{Figure: "B6", Metric: "RSS of vigil + adapter, idle (registered, 1 s after start)",
		Value: mb(rp.idleRSS), Target: "40 MB", Data: map[string]int64{"rss_bytes": rp.idleRSS}}}
	for _, r := range rp.rows {
		if r.peakRSS() == 0 {
			continue
		}
		rows = append(rows, report.Row{Figure: "B6",
			Metric: fmt.Sprintf("RSS of vigil + adapter, peak at %d streams, %s delay", r.streams, delayName(r.delay)),
			Value:  mb(r.peakRSS()), Data: map[string]int64{"rss_bytes": r.peakRSS()}})
	}
	samples, err := e.startTrials()
	if err != nil {
		return rows, err
	}
	rows = append(rows, report.SummaryRow("B6", "`vigil run` start→passing in Consul, engine already serving",
		samples, "150 ms"))
	return rows, nil
}
