package command

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// durationStrings is a logger that writes time.Duration values as duration
// strings ("5s", "250ms"): hclog's JSON format writes them as integer
// nanoseconds, which a reader of the log cannot tell from a count. Loggers
// it names or adds arguments to do the same.
type durationStrings struct{ hclog.Logger }

// strs returns args with every time.Duration value a string; args is
// left as it was.
func strs(args []any) []any {
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
	l.Logger.Log(level, msg, strs(args)...)
}
func (l durationStrings) Trace(msg string, args ...any) { l.Logger.Trace(msg, strs(args)...) }
func (l durationStrings) Debug(msg string, args ...any) { l.Logger.Debug(msg, strs(args)...) }
func (l durationStrings) Info(msg string, args ...any)  { l.Logger.Info(msg, strs(args)...) }
func (l durationStrings) Warn(msg string, args ...any)  { l.Logger.Warn(msg, strs(args)...) }
func (l durationStrings) Error(msg string, args ...any) { l.Logger.Error(msg, strs(args)...) }

func (l durationStrings) With(args ...any) hclog.Logger {
	return durationStrings{l.Logger.With(strs(args)...)}
}
func (l durationStrings) Named(name string) hclog.Logger {
	return durationStrings{l.Logger.Named(name)}
}
func (l durationStrings) ResetNamed(name string) hclog.Logger {
	return durationStrings{l.Logger.ResetNamed(name)}
}
