package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestBadFlags: bad input exits 78 with a message naming the flag and what it
// accepts, before anything is started.
func TestBadFlags(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown engine", []string{"--engine", "nope"}, []string{"--engine", "vllm"}},
		{"malformed engine address", []string{"--engine-addr", "localhost"}, []string{"--engine-addr", "host:port"}},
		{"malformed listen address", []string{"--listen", "127.0.0.1:99999"}, []string{"--listen", "port"}},
		{"wildcard listen", []string{"--listen", "0.0.0.0:8470"}, []string{"--listen", "--advertise-addr"}},
		{"negative duration", []string{"--grace-period", "-5s"}, []string{"--grace-period", "positive duration"}},
		{"bad discovery", []string{"--discovery", "etcd"}, []string{"--discovery", "file or consul"}},
		{"unparsable duration", []string{"--check-ttl", "soon"}, []string{"check-ttl"}},
		{"blank served model name", []string{"--served-model-name", " "}, []string{"--served-model-name", "blank"}},
		{"unknown flag", []string{"--no-such-flag"}, []string{"no-such-flag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startProc(t, "vigil", vigilBin, append([]string{"run", "--registry-dir", t.TempDir()}, tc.args...)...)
			out := p.exits(78, 10*time.Second, tc.want...)
			if strings.Contains(out, "starting engine adapter") {
				t.Errorf("vigil started work despite bad input:\n%s", out)
			}
		})
	}
}

// TestBadFlagsRejectedByAdapter: a flag the adapter checks (an engine
// option it does not take) is rejected across the plugin boundary, and vigil
// names the flag, not the sdk's field, and exits 78 without registering.
func TestBadFlagsRejectedByAdapter(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := firstEngine()
	p := startProc(t, "vigil", vigilBin, "run", "--engine", e.Name, "--engine-addr", addr(freePort(t)),
		"--listen", addr(freePort(t)), "--registry-dir", t.TempDir(), "--engine-option", "no-such-option=1")
	if code := p.wait(30 * time.Second); code != 78 {
		t.Fatalf("exit code = %d, want 78", code)
	}
	line := p.findLine("rejected its configuration")
	for _, w := range []string{"--engine-option", "no-such-option", "unknown key"} {
		if !strings.Contains(line, w) {
			t.Errorf("rejection does not mention %q: %q\n%s", w, line, p.output())
		}
	}
	if strings.Contains(line, "StartRequest.") {
		t.Errorf("rejection names the sdk's field, want the flag: %q", line)
	}
	if strings.Contains(p.output(), "worker registered") {
		t.Errorf("vigil registered despite the rejection:\n%s", p.output())
	}
}
