package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/sdk/internal/wire"
)

// TestCapEntry: an entry within the bound is written as it is; a longer one
// still parses, fits, keeps its level and timestamp, and marks each cut.
func TestCapEntry(t *testing.T) {
	t.Parallel()
	const max = 1024
	entry := func(fields map[string]any) []byte {
		fields["@level"], fields["@timestamp"] = "warn", "2026-01-02T03:04:05.000000Z"
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	for _, tc := range []struct {
		name   string
		in     []byte
		whole  bool   // written as it is
		marked string // a value that must hold the cut marker
	}{
		{"short", entry(map[string]any{"@message": "hello", "k": "v"}), true, ""},
		{"exactly the bound", entry(map[string]any{"@message": strings.Repeat("m", max-len(entry(map[string]any{"@message": ""})))}), true, ""},
		{"long message", entry(map[string]any{"@message": strings.Repeat("m", 5000)}), false, "@message"},
		{"long value", entry(map[string]any{"@message": "payload", "body": strings.Repeat("b", 5000)}), false, "body"},
		{"long list", entry(map[string]any{"@message": "ids", "ids": make([]int, 3000)}), false, "ids"},
		{"many keys", entry(manyKeys(200)), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := capEntry(tc.in, max)
			if tc.whole {
				if !bytes.Equal(out, tc.in) {
					t.Fatalf("capEntry changed an entry of %d bytes (bound %d):\n%s", len(tc.in), max, out)
				}
				return
			}
			if len(out) > max || !bytes.HasSuffix(out, []byte("\n")) {
				t.Fatalf("capEntry gave %d bytes, want at most %d ending in a newline", len(out), max)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("capped entry does not parse: %v\n%s", err, out)
			}
			if got["@level"] != "warn" || got["@timestamp"] != "2026-01-02T03:04:05.000000Z" {
				t.Errorf("capped entry lost its level or timestamp: %s", out)
			}
			if _, ok := got["@message"].(string); !ok {
				t.Errorf("capped entry has no string @message (go-plugin requires one): %s", out)
			}
			if s, _ := got[tc.marked].(string); tc.marked != "" && !strings.Contains(s, "…[cut ") {
				t.Errorf("%s = %.80q..., want it cut with a marker", tc.marked, s)
			}
		})
	}
}

func manyKeys(n int) map[string]any {
	m := map[string]any{"@message": "many"}
	for i := range n {
		m[fmt.Sprintf("key%03d", i)] = strings.Repeat("v", 40)
	}
	return m
}

func TestCutLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcdef", 4, "abcd…[cut 2 bytes]"},
		{"ab€", 3, "ab…[cut 3 bytes]"}, // € is 3 bytes: not split
		{"abc", 0, "…[cut 3 bytes]"},
	} {
		if got := string(cutLine([]byte(tc.in), tc.limit)); got != tc.want {
			t.Errorf("cutLine(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// recorder is an hclog sink that keeps each line and signals every new one.
type recorder struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		line, rest, ok := bytes.Cut(r.partial, []byte{'\n'})
		if !ok {
			break
		}
		r.lines = append(r.lines, string(line))
		r.partial = rest
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return len(p), nil
}

func (r *recorder) logger(name string, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: r})
}

func (r *recorder) snapshot() ([]string, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...), r.changed
}

// lineLogger splits writes of any size into lines, logs each at INFO with
// its args, and cuts a long line with the count of bytes dropped.
func TestLineLogger(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l := &wire.LineLogger{Log: rec.logger("a", hclog.Info), Args: []any{"stream", "stdout"}, Max: 8}
	for _, w := range []string{"one\ntw", "o\r\n", "", "a-long-line-here\nlast"} {
		if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
		}
	}
	l.Flush()
	lines, _ := rec.snapshot()
	var got []string
	for _, line := range lines {
		_, msg, _ := strings.Cut(line, "[INFO]  a: ")
		got = append(got, msg)
	}
	want := []string{"one: stream=stdout", "two: stream=stdout", "a-long-l…[cut 8 bytes]: stream=stdout", "last: stream=stdout"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged lines mismatch (-want +got):\n%s", diff)
	}
}

// The adapter's logger writes at the level the host gives it, info when
// the host gives none or nonsense.
func TestNewLoggerLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  string
		want hclog.Level
	}{
		{"", hclog.Info}, {"bogus", hclog.Info}, {"trace", hclog.Trace}, {"warn", hclog.Warn}, {"off", hclog.Off},
	} {
		if got := newLogger(&bytes.Buffer{}, tc.env).GetLevel(); got != tc.want {
			t.Errorf("newLogger(%q).GetLevel() = %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestLoggerDurations: the adapter's JSON entries carry durations as
// duration strings, which the host relays as they are; integer
// nanoseconds would reach the host's log as a bare number.
func TestLoggerDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "info")
	log.Named("wait").With("retry_max", 250*time.Millisecond).Info("waiting", "waited", 90*time.Second)
	var fields map[string]any
	if err := json.Unmarshal(buf.Bytes(), &fields); err != nil {
		t.Fatalf("entry %q: %v", buf.String(), err)
	}
	if fields["waited"] != "1m30s" || fields["retry_max"] != "250ms" {
		t.Errorf("entry %v, want waited \"1m30s\" and retry_max \"250ms\"", fields)
	}
}
