package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a process under test: its output lines are kept and can be
// awaited, and its exit is an event.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line

	done     chan struct{}
	exitCode int
}

// startProc starts bin with args; the process is killed at the end of the
// test if it is still running, and its output is logged when the test fails.
func startProc(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, bin, args...)
}

func startProcEnv(t testing.TB, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, changed: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	// A race-enabled binary sleeps 1s at exit by default (to let other
	// goroutines report); that would count against exit-time bounds. A race
	// found still changes the exit code to 66.
	p.cmd.Env = append(p.cmd.Env, "GORACE=atexit_sleep_ms=0")
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		<-scanned
		p.exitCode = exitCode(err)
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- output of %s (exit %d):\n%s", name, p.exitCode, p.output())
		}
	})
	return p
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits until a line containing substr appears and returns it.
func (p *proc) waitLine(substr string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], substr) {
				line := p.lines[seen]
				p.mu.Unlock()
				return line
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.done:
			// The process is gone: the scanner has delivered every line.
			if l := p.findLine(substr); l != "" {
				return l
			}
			p.t.Fatalf("%s exited (code %d) before logging %q", p.name, p.exitCode, substr)
		case <-deadline.C:
			p.t.Fatalf("%s did not log %q within %s", p.name, substr, timeout)
		}
	}
}

func (p *proc) findLine(substr string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
		return -1
	}
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling %s: %v", p.name, err)
	}
}

// children returns the pids of the process's direct children, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscanf(e.Name(), "%d", &child); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		var state string
		var ppid int
		if i < 0 {
			continue
		}
		if _, err := fmt.Sscanf(string(stat[i+1:]), " %s %d", &state, &ppid); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid names a process that has not exited (a zombie
// counts as exited).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
}
