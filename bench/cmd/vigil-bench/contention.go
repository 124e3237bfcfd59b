package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// busyShare is the share of the machine taken by processes outside the
// run above which a figure is flagged as disturbed.
const busyShare = 0.05

// contention is how much CPU processes outside the run used while a
// figure ran: the machine may be shared (other builds and tests), and a
// busy neighbour slows every figure here.
type contention struct {
	Figure      string  `json:"figure"`
	Engine      string  `json:"engine"`
	WallSeconds float64 `json:"wall_seconds"`
	OwnCPU      float64 `json:"own_cpu_seconds"`
	OtherCPU    float64 `json:"other_cpu_seconds"`
	// OtherShare is OtherCPU over the machine's capacity (cores × wall).
	OtherShare float64 `json:"other_share"`
}

// meter reads the machine's and the run's CPU at the start of a figure.
type meter struct {
	machine, own time.Duration
	start        time.Time
}

func startMeter() meter {
	return meter{machine: harness.MachineCPU(), own: harness.OwnCPU(), start: time.Now()}
}

// stop returns the contention of the figure's run for engine.
func (m meter) stop(figure, engine string) contention {
	wall := time.Since(m.start)
	machine, own := harness.MachineCPU()-m.machine, harness.OwnCPU()-m.own
	// The two readings tick separately: a small negative remainder is
	// rounding, not a measurement.
	other := max(0, machine-own)
	c := contention{Figure: figure, Engine: engine, WallSeconds: wall.Seconds(), OwnCPU: own.Seconds(), OtherCPU: other.Seconds()}
	// A figure that reuses another's trials (B4 reads B1's) ends within
	// milliseconds, where one 10 ms tick of the readings would be a share
	// of thousands of percent: it ran nothing to disturb.
	if wall >= minMeteredWall {
		c.OtherShare = other.Seconds() / (wall.Seconds() * float64(runtime.NumCPU()))
	}
	return c
}

// minMeteredWall is the shortest run whose share of other processes'
// CPU is reported; shorter ones are reported as 0.
const minMeteredWall = 500 * time.Millisecond

// contentionSection is the per-figure table of results.md.
func contentionSection(cs []contention) report.Section {
	var b strings.Builder
	b.WriteString("| figure | engine | wall | CPU of this run | CPU of other processes | other processes' share of the machine |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	var disturbed []string
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %s | %.0f s | %.1f s | %.1f s | %.0f%% |\n", c.Figure, c.Engine, c.WallSeconds, c.OwnCPU, c.OtherCPU, 100*c.OtherShare)
		if c.OtherShare > busyShare {
			disturbed = append(disturbed, c.Figure+" ("+c.Engine+")")
		}
	}
	note := "No other process took a noticeable share of the machine."
	if len(disturbed) > 0 {
		note = fmt.Sprintf("Processes outside the run took more than %.0f%% of the machine during %s: "+
			"those figures are slower than on a quiet machine.", 100*busyShare, strings.Join(disturbed, ", "))
	}
	return report.Section{
		Title: "Other load on the machine",
		Text:  b.String(),
		Data:  cs,
		Notes: []string{"Busy time of all cores (/proc/stat) minus the CPU of the driver and every process it started " +
			"(utime+stime, reaped children included). " + note},
	}
}
