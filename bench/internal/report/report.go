// Package report formats benchmark results: one table of figures for the
// terminal, results.md for people and results.json for programs.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilhq/vigil/bench/internal/stats"
)

// Row is one line of the table: a figure's metric, its value and its
// target. Targets are printed beside the value, never asserted.
type Row struct {
	Figure string `json:"figure"`
	// Engine is the engine the figure ran against.
	Engine string `json:"engine,omitempty"`
	Metric string `json:"metric"`
	Value  string `json:"value"`
	Target string `json:"target,omitempty"`
	// Data holds the numbers behind Value, for results.json.
	Data any `json:"data,omitempty"`
}

// Section is a titled block of extra detail in results.md (B5's per-row
// table), kept in results.json under its title too.
type Section struct {
	Title string   `json:"title"`
	Text  string   `json:"-"`
	Data  any      `json:"data,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Results is one run of the bench.
type Results struct {
	Machine  Machine   `json:"machine"`
	Quick    bool      `json:"quick"`
	Figures  []string  `json:"figures_run"`
	Engines  []string  `json:"engines"`
	Rows     []Row     `json:"rows"`
	Sections []Section `json:"sections,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
	Runtime  float64   `json:"runtime_seconds"`
}

// WriteTable prints the rows as an aligned text table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tENGINE\tMETRIC\tVALUE\tTARGET")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Figure, orDash(r.Engine), r.Metric, r.Value, orDash(r.Target))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Write writes results.md and results.json into dir.
func Write(dir string, res Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(Markdown(res)), 0o644); err != nil {
		return fmt.Errorf("writing results.md: %w", err)
	}
	return nil
}

// Markdown renders the results as the results.md page.
func Markdown(res Results) string {
	var b strings.Builder
	kind := "full run (`make bench`)"
	if res.Quick {
		kind = "quick run (`make bench-quick`: one short trial of each figure; not a measurement)"
	}
	fmt.Fprintf(&b, "# vigil benchmark results\n\n%s, %s, %.0f s; engines: %s.\n\n", kind, res.Machine.Date, res.Runtime, strings.Join(res.Engines, ", "))
	b.WriteString("Produced by `bench/cmd/vigil-bench`; see [bench/README.md](README.md) for how each figure is measured. ")
	b.WriteString("Targets are printed beside the figures, not asserted.\n\n")
	b.WriteString("| figure | engine | metric | value | target |\n|---|---|---|---|---|\n")
	for _, r := range res.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Figure, orDash(r.Engine), escape(r.Metric), escape(r.Value), escape(orDash(r.Target)))
	}
	for _, s := range res.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.Title, s.Text)
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "\n%s\n", n)
		}
	}
	b.WriteString("\n## Machine\n\n")
	b.WriteString(res.Machine.Markdown())
	if len(res.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range res.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// Dur formats a duration for the table with three significant digits.
func Dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Dur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3g ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3g s", d.Seconds())
	}
}

// Ms is d in milliseconds, for results.json.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// SummaryData is a stats.Summary in milliseconds, for results.json, with
// the samples themselves when a row has them.
type SummaryData struct {
	N         int       `json:"n"`
	P50Ms     float64   `json:"p50_ms"`
	P99Ms     float64   `json:"p99_ms"`
	MaxMs     float64   `json:"max_ms"`
	SamplesMs []float64 `json:"samples_ms,omitempty"`
}

// Summary converts s for results.json, without samples.
func Summary(s stats.Summary) SummaryData {
	return SummaryData{N: s.N, P50Ms: Ms(s.P50), P99Ms: Ms(s.P99), MaxMs: Ms(s.Max)}
}

// SummaryRow is a row whose value is the p50, p99 and max of samples (or
// the one sample, in a quick run).
func SummaryRow(figure, metric string, samples []time.Duration, target string) Row {
	s := stats.Summarize(samples)
	data := Summary(s)
	for _, d := range samples {
		data.SamplesMs = append(data.SamplesMs, Ms(d))
	}
	value := fmt.Sprintf("p50 %s, p99 %s, max %s", Dur(s.P50), Dur(s.P99), Dur(s.Max))
	if s.N == 1 {
		value = Dur(s.Max)
	}
	return Row{Figure: figure, Metric: fmt.Sprintf("%s (n=%d)", metric, s.N), Value: value, Target: target, Data: data}
}

// ErrorRow stands in for a figure that failed, so the table still shows it.
func ErrorRow(figure string, err error) Row {
	msg := strings.ReplaceAll(err.Error(), "\n", " ⏎ ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return Row{Figure: figure, Metric: "error", Value: msg}
}
