package command

import (
	"strings"
	"testing"
)

// Both commands check the metrics flags before starting anything.
func TestMetricsFlagsRejectBadInput(t *testing.T) {
	for _, cmd := range []string{"run", "route"} {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"pprof alone", []string{"--pprof"}, "--pprof: needs --metrics-listen"},
			{"no port", []string{"--metrics-listen", "9100"}, `--metrics-listen "9100": want host:port`},
			{"bad port", []string{"--metrics-listen", "127.0.0.1:70000"}, `--metrics-listen "127.0.0.1:70000": port must be a number from 0 to 65535`},
		} {
			t.Run(cmd+"/"+tc.name, func(t *testing.T) {
				code, out := runArgs(t, append([]string{cmd, "--registry-dir", t.TempDir()}, tc.args...)...)
				if code != ExitConfig {
					t.Errorf("exit code = %d, want %d; output:\n%s", code, ExitConfig, out)
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("output does not contain %q:\n%s", tc.want, out)
				}
			})
		}
	}
}
