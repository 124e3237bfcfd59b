package discovery_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
)

func TestFailuresLogFirstAndEveryTenth(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var f discovery.Failures
	f.Recover(log, "recovered") // no failures yet: nothing to log
	for range 25 {
		f.Fail(log, "failed", "backend", "x")
	}
	f.Recover(log, "recovered")
	f.Recover(log, "recovered")
	f.Fail(log, "failed")

	var got []string
	for l := range strings.Lines(buf.String()) {
		_, msg, _ := strings.Cut(l, "] ")
		got = append(got, strings.TrimSpace(msg))
	}
	want := []string{
		"failed: backend=x failures=1",
		"failed: backend=x failures=11",
		"failed: backend=x failures=21",
		"recovered: failures=25",
		"failed: failures=1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
