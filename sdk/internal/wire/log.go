package wire

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// EnvLogLevel is the variable through which the host tells the adapter
// its log level; see pluginhost.EnvLogLevel.
const EnvLogLevel = "VIGIL_PLUGIN_LOG_LEVEL"

// CutMarker ends a value or line that was cut; %d is the bytes dropped.
const CutMarker = "…[cut %d bytes]"

// CutLine returns b when it is at most limit bytes long, else its first
// limit bytes (to a character boundary) and the cut marker.
func CutLine(b []byte, limit int) []byte {
	if len(b) <= limit {
		return b
	}
	n := max(limit, 0)
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return fmt.Appendf(bytes.Clone(b[:n]), CutMarker, len(b)-n)
}

// LineLogger logs what is written to it a line at a time, at INFO with
// Args, each line held to Max bytes (the rest of a longer line is dropped
// and counted in the cut marker). It takes writes of any size, as
// go-plugin's stdio stream delivers them.
type LineLogger struct {
	Log  hclog.Logger
	Args []any
	Max  int

	mu   sync.Mutex
	line []byte
	cut  int // bytes of the current line beyond Max
}

func (l *LineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		chunk, rest, eol := bytes.Cut(p, []byte{'\n'})
		if room := l.Max - len(l.line); len(chunk) > room {
			l.cut += len(chunk) - room
			chunk = chunk[:room]
		}
		l.line = append(l.line, chunk...)
		if !eol {
			break
		}
		l.emit()
		p = rest
	}
	return n, nil
}

// Flush logs a last line that has no newline yet.
func (l *LineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.line) > 0 || l.cut > 0 {
		l.emit()
	}
}

func (l *LineLogger) emit() {
	line := string(bytes.TrimSuffix(l.line, []byte{'\r'}))
	if l.cut > 0 {
		line = strings.ToValidUTF8(line, "") // the cut may split a character
		line += fmt.Sprintf(CutMarker, l.cut)
	}
	l.Log.Info(line, l.Args...)
	l.line, l.cut = l.line[:0], 0
}
