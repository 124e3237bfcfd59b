package sdk

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/sdk/internal/wire"
)

// MaxLogLine is the longest line, in bytes, that crosses from an adapter
// into the host's log whole: the host reads the adapter's stderr with a
// buffer this large (go-plugin's own, 64 KiB, splits longer lines into
// pieces that it logs at DEBUG and no longer parses), Logger shortens a
// longer entry's values, and a longer line written to stdout or stderr is
// cut; every cut says how many bytes it dropped. 256 KiB holds any
// reasonable log entry (a prompt, a stack trace) and bounds the memory a
// runaway line takes.
const MaxLogLine = 256 << 10

// cutMarker ends a value or line that was cut; %d is the bytes dropped.
const cutMarker = wire.CutMarker

// stderr is the process's own stderr, kept before Serve points os.Stderr
// at go-plugin's stdio stream: JSON lines on it are what go-plugin relays
// into the host's log at their level.
var stderr = os.Stderr

var adapterLogger = sync.OnceValue(func() hclog.Logger {
	return newLogger(stderr, os.Getenv(wire.EnvLogLevel))
})

// Logger returns the adapter's logger, the one Serve uses unless given
// WithLogger. Its entries reach vigil's log at their own level, under the
// adapter's name (vigil.adapter.<engine>), with their key-value pairs;
// entries below vigil's --log-level are not written at all. An entry
// longer than MaxLogLine has its longest values cut, each marked with the
// bytes dropped.
func Logger() hclog.Logger { return adapterLogger() }

// newLogger is a JSON logger writing to w at level (info when it is not a
// level's name), each entry held to MaxLogLine.
func newLogger(w io.Writer, level string) hclog.Logger {
	l := hclog.LevelFromString(level)
	if l == hclog.NoLevel {
		l = hclog.Info
	}
	return DurationStrings(hclog.New(&hclog.LoggerOptions{
		Level:      l,
		Output:     &capWriter{w: w, max: MaxLogLine},
		JSONFormat: true,
	}))
}

// DurationStrings returns a logger that writes l's time.Duration arguments
// as duration strings ("5s", "250ms"): hclog's JSON format writes them as
// integer nanoseconds, which a reader cannot tell from a count (and which
// the host would relay into its log as a bare number). Loggers it names or
// adds arguments to do the same. The adapter's logger (Logger) is one.
func DurationStrings(l hclog.Logger) hclog.Logger { return durationStrings{l} }

type durationStrings struct{ hclog.Logger }

// durStrs returns args with every time.Duration value a string; args is
// left as it was.
func durStrs(args []any) []any {
	var out []any
	for i := 1; i < len(args); i += 2 {
		if d, ok := args[i].(time.Duration); ok {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = d.String()
		}
	}
	if out == nil {
		return args
	}
	return out
}

func (l durationStrings) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, durStrs(args)...)
}
func (l durationStrings) Trace(msg string, args ...any) { l.Logger.Trace(msg, durStrs(args)...) }
func (l durationStrings) Debug(msg string, args ...any) { l.Logger.Debug(msg, durStrs(args)...) }
func (l durationStrings) Info(msg string, args ...any)  { l.Logger.Info(msg, durStrs(args)...) }
func (l durationStrings) Warn(msg string, args ...any)  { l.Logger.Warn(msg, durStrs(args)...) }
func (l durationStrings) Error(msg string, args ...any) { l.Logger.Error(msg, durStrs(args)...) }
func (l durationStrings) With(args ...any) hclog.Logger {
	return durationStrings{l.Logger.With(durStrs(args)...)}
}
func (l durationStrings) Named(name string) hclog.Logger {
	return durationStrings{l.Logger.Named(name)}
}
func (l durationStrings) ResetNamed(name string) hclog.Logger {
	return durationStrings{l.Logger.ResetNamed(name)}
}

// capWriter writes hclog's JSON entries, one per Write, each held to max
// bytes by capEntry.
type capWriter struct {
	w   io.Writer
	max int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write(capEntry(p, c.max)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// minCut is the shortest a value is cut to before capEntry gives up on
// keeping every key.
const minCut = 64

// capEntry returns entry, one JSON log line, when it is at most max bytes
// long; else the entry with its longest values cut and marked, so that it
// still parses (go-plugin relays only whole JSON lines at their level).
// @level and @timestamp are kept; an entry that still does not fit keeps
// only those and its message.
func capEntry(entry []byte, max int) []byte {
	if len(entry) <= max {
		return entry
	}
	var fields map[string]any
	if err := json.Unmarshal(entry, &fields); err != nil {
		line := cutLine(bytes.TrimRight(entry, "\n"), max-len(cutMarker)-20)
		return append(line, '\n')
	}
	for limit := max / 2; limit >= minCut; limit /= 2 {
		if out, ok := fitEntry(fields, limit, max); ok {
			return out
		}
	}
	msg, _ := fields["@message"].(string)
	short := map[string]any{"@level": fields["@level"], "@timestamp": fields["@timestamp"], "@message": msg}
	out, _ := fitEntry(short, max/4, max)
	return out
}

// fitEntry encodes fields with every value longer than limit cut to it,
// and reports whether the line is at most max bytes long.
func fitEntry(fields map[string]any, limit, max int) ([]byte, bool) {
	cut := make(map[string]any, len(fields))
	for k, v := range fields {
		if k == "@level" || k == "@timestamp" {
			cut[k] = v
			continue
		}
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			if len(b) <= limit {
				cut[k] = v
				continue
			}
			s = string(b)
		}
		cut[k] = string(cutLine([]byte(s), limit))
	}
	out, err := json.Marshal(cut)
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), len(out) < max
}

// cutLine is wire.CutLine.
func cutLine(b []byte, limit int) []byte { return wire.CutLine(b, limit) }
