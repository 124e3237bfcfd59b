package sdktest

import (
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// launched starts h.Executable with pluginhost.Launch, as vigil starts an
// adapter, and returns its Engine; the process is killed when t ends.
func launched(t tb, h config) sdk.Engine {
	t.Helper()
	if h.Command == nil {
		t.Skip("Harness.Executable is empty: no built adapter")
	}
	var log io.Writer
	if h.adapterLog != nil {
		log = h.adapterLog(t)
	} else {
		// The log goes quiet before t ends; registered first, it runs last.
		tl := &testLog{t: t}
		t.Cleanup(tl.stop)
		log = tl
	}
	p, err := pluginhost.Launch(t.Context(), pluginhost.LaunchConfig{
		Cmd:    h.Command(),
		Name:   h.Name,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: log}),
	})
	if err != nil {
		t.Fatalf("pluginhost.Launch(%s) error = %v, want the adapter started through the plugin handshake", h.Executable, err)
	}
	t.Cleanup(p.Kill)
	if p.Version != pluginhost.ProtocolVersion {
		t.Errorf("pluginhost.Launch(%s) negotiated protocol version %d, want %d", h.Executable, p.Version, pluginhost.ProtocolVersion)
	}
	shutdownAtEnd(t, p.Engine)
	return p.Engine
}

// testLog writes an adapter's log lines to the test log until stopped:
// go-plugin may still log after the test's last cleanup has begun.
type testLog struct {
	t       tb
	mu      sync.Mutex
	stopped bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}

// ServeAdapter lets a test binary stand in for an adapter executable. When
// the process was started as an adapter (by pluginhost.Launch, which sets the
// handshake's magic cookie in its environment), ServeAdapter serves the
// Engine newEngine returns until the host ends it, and returns true.
// Otherwise it returns false at once, having set GORACE to
// atexit_sleep_ms=0 unless it was set: a binary built with -race sleeps a
// second as it exits, which every adapter process would add to its test.
// Call it first in TestMain, and set Harness.Executable to os.Args[0]: the
// executable mode then needs no build step.
func ServeAdapter(newEngine func() sdk.Engine) bool {
	if os.Getenv(pluginhost.Handshake.MagicCookieKey) != pluginhost.Handshake.MagicCookieValue {
		if _, ok := os.LookupEnv("GORACE"); !ok {
			_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		return false
	}
	sdk.Serve(newEngine())
	return true
}
