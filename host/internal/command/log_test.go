package command

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/logwriter"
)

// The count of log entries the log writer dropped is an entry in the log's
// own format, at WARN, written whatever --log-level is: JSON consumers
// parse it like any other entry.
func TestDroppedNotice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format string
		check  func(t *testing.T, entry string)
	}{
		{"json", func(t *testing.T, entry string) {
			var fields map[string]any
			if err := json.Unmarshal([]byte(entry), &fields); err != nil {
				t.Fatalf("notice %q is not one JSON entry: %v", entry, err)
			}
			if fields["@level"] != "warn" || fields["dropped"] != float64(3) || fields["@module"] != "vigil" {
				t.Errorf("notice = %v, want @level warn, dropped 3, @module vigil", fields)
			}
		}},
		{"text", func(t *testing.T, entry string) {
			if !strings.Contains(entry, "[WARN]  vigil: log entries dropped") || !strings.Contains(entry, "dropped=3") {
				t.Errorf("notice = %q, want a WARN entry of vigil's saying dropped=3", entry)
			}
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			entry := string(logConfig{format: tc.format, level: hclog.Error}.droppedNotice(3))
			if strings.Count(entry, "\n") != 1 || !strings.HasSuffix(entry, "\n") {
				t.Fatalf("notice %q is not one line", entry)
			}
			tc.check(t, entry)
		})
	}
}

// gate is a log output that blocks its first write until opened.
type gate struct {
	blocked, open chan struct{}
	once          sync.Once
	out           strings.Builder
}

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.blocked)
		<-g.open
	})
	return g.out.Write(p)
}

// vigil's logger, on Main's log writer, has entries the writer dropped
// counted in its own format.
func TestLoggerSetsDroppedNotice(t *testing.T) {
	t.Parallel()
	g := &gate{blocked: make(chan struct{}), open: make(chan struct{})}
	w := logwriter.New(g, 1) // one entry queued at most
	log := logConfig{format: "json", level: hclog.Info}.logger(w)
	log.Info("taken")
	<-g.blocked
	log.Info("queued")
	log.Info("dropped")
	close(g.open)
	w.Close(time.Second)
	var messages []string
	for _, line := range strings.Split(strings.TrimSpace(g.out.String()), "\n") {
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		messages = append(messages, fmt.Sprint(fields["@message"]))
	}
	want := []string{"taken", "queued", "log entries dropped: the log output was not taking them"}
	if strings.Join(messages, "|") != strings.Join(want, "|") {
		t.Errorf("log messages = %q, want %q", messages, want)
	}
}

// TestJSONDurations: JSON logs carry durations as duration strings, as the
// text format does, from named loggers and With arguments too; a reader
// cannot take 5000000000 for five seconds.
func TestJSONDurations(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	log := logConfig{format: "json", level: hclog.Info}.logger(&out)
	log.Info("a", "grace_period", 5*time.Second, "n", 3)
	log.Named("endpoint").With("ttl", 250*time.Millisecond).Warn("b", "wait", time.Minute+30*time.Second)
	log.Log(hclog.Error, "c", "d", time.Duration(0))
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("entry %q: %v", line, err)
		}
		got = append(got, fields)
	}
	want := []map[string]any{{"grace_period": "5s", "n": float64(3)}, {"ttl": "250ms", "wait": "1m30s"}, {"d": "0s"}}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("entry %d: %s = %#v, want %#v", i, k, got[i][k], v)
			}
		}
	}
}
