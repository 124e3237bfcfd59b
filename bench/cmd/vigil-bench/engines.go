package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
)

// defaultHealthInterval is vigil run's --health-interval default, which
// every figure runs with.
const defaultHealthInterval = 500 * time.Millisecond

// measures reports whether figure is measured with the engine.
func (b benchEngine) measures(figure string) bool {
	return b.figures == nil || slices.Contains(b.figures, figure)
}

// lossTarget is the target of a B1 or B4 row of case c: target, or for a
// polled engine's unhealthy case the poll interval plus target.
func (b benchEngine) lossTarget(c lossCase, prefix string, target time.Duration) string {
	if b.pollInterval == 0 || c.kill {
		return prefix + report.Dur(target)
	}
	return fmt.Sprintf("%s%s (interval + %s)", prefix, report.Dur(b.pollInterval+target), report.Dur(target))
}

// lossMetric names case c's row for the engine: a polled engine's
// unhealthy case says how often it is polled.
func (b benchEngine) lossMetric(c lossCase, metric string) string {
	if b.pollInterval == 0 || c.kill {
		return metric
	}
	return fmt.Sprintf("%s, health polled every %s", metric, report.Dur(b.pollInterval))
}
