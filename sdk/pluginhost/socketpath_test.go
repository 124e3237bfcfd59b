package pluginhost

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A TMPDIR too long for a Unix socket path is refused before the adapter
// starts, naming the variable, its length and the limit: not reported as
// an adapter that exited before its handshake (terraform #22198).
func TestLaunchRefusesLongSocketDir(t *testing.T) {
	t.Parallel()
	if maxSocketPath() == 0 {
		t.Skip("no Unix sockets on this platform")
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	long = long[:120]
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TMPDIR", "PLUGIN_UNIX_SOCKET_DIR"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := testAdapterCmd("serving")
			cmd.Env = append(cmd.Env, name+"="+long)
			p, err := Launch(t.Context(), LaunchConfig{Cmd: cmd})
			if err == nil {
				p.Kill()
				t.Fatal("Launch() succeeded, want ErrSocketPath")
			}
			for _, want := range []string{name + " is 120 bytes", "limit of " + strconv.Itoa(maxSocketPath())} {
				if !errors.Is(err, ErrSocketPath) || !strings.Contains(err.Error(), want) {
					t.Errorf("Launch() error = %v, want ErrSocketPath saying %q", err, want)
				}
			}
			if cmd.Process != nil {
				t.Errorf("process %d started", cmd.Process.Pid)
			}
		})
	}
}

// The longest directory the check lets through does take the adapter's
// socket: the check is not stricter than the platform.
func TestLaunchLongestSocketDir(t *testing.T) {
	t.Parallel()
	if maxSocketPath() == 0 {
		t.Skip("no Unix sockets on this platform")
	}
	base := t.TempDir()
	n := maxSocketPath() - socketNameLen
	if len(base)+1 > n {
		t.Skipf("the test's temporary directory %q is already too long", base)
	}
	dir := base + "/" + strings.Repeat("d", n-len(base)-1)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := launchTest(t, "serving", newRecorder(), "TMPDIR="+dir)
	if err != nil {
		t.Fatalf("Launch() with a TMPDIR of %d bytes: %v", len(dir), err)
	}
}
