package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxLines bounds the output kept per process. vigil, vllm-mock and Consul
// log a few lines per lifecycle event, never per request, so the bound is
// only a guard against a chatty build.
const maxLines = 100_000

// killWait bounds how long Kill waits for a killed process to be reaped.
const killWait = 10 * time.Second

// Proc is a process the harness started, in a process group of its own so
// that killing it also kills its children (vigil's engine adapter). Its
// output lines are kept and can be awaited, and its exit is timed the
// moment wait4 returns.
type Proc struct {
	Name string
	Cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
	scanned chan struct{} // closed when the output pipe reached EOF

	done     chan struct{}
	exitAt   time.Time
	exitCode int
}

// StartProc runs bin with args and env added to the driver's environment.
// Nothing kills it but its caller: see Harness.Start.
func StartProc(name string, env []string, bin string, args ...string) (*Proc, error) {
	return StartProcStderr(name, env, nil, bin, args...)
}

// StartProcStderr is StartProc with the process's stderr on the file
// stderr, when it is not nil, instead of the output pipe: a pipe whose
// reader the caller controls, to show what a log output that breaks (the
// reader closes it) or stalls (the reader stops reading) does to the
// process. Its lines are then the caller's to read; the Proc sees stdout
// alone.
func StartProcStderr(name string, env []string, stderr *os.File, bin string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, changed: make(chan struct{}), scanned: make(chan struct{}), done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	// Pdeathsig reaches the children if the driver itself is killed
	// outright; Setpgid lets Kill take the adapter down with vigil.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A pipe of our own (an *os.File) keeps exec from adding copy
	// goroutines that Wait would wait for: Wait then returns at the
	// process's exit, not when its children close their inherited output.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe for %s: %w", name, err)
	}
	p.Cmd.Stdout, p.Cmd.Stderr = w, w
	if stderr != nil {
		p.Cmd.Stderr = stderr
	}
	err = p.Cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go p.scan(r)
	go p.reap()
	return p, nil
}

func (p *Proc) scan(r *os.File) {
	defer close(p.scanned)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.mu.Lock()
		if len(p.lines) < maxLines {
			p.lines = append(p.lines, sc.Text())
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

func (p *Proc) reap() {
	err := p.Cmd.Wait()
	now := time.Now()
	p.mu.Lock()
	p.exitAt, p.exitCode = now, exitCode(err)
	p.mu.Unlock()
	close(p.done)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// OutputDone is closed when the output pipe reached EOF: the process and
// every child that inherited its output have closed it, and every line is in.
func (p *Proc) OutputDone() <-chan struct{} { return p.scanned }

// ExitCode is the exit code (128+signal when killed by one) once the process
// has exited, else 0.
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode
}

// Wait waits up to timeout for the exit and returns when it happened and
// the exit code (128+signal when killed by one).
func (p *Proc) Wait(timeout time.Duration) (time.Time, int, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.exitAt, p.exitCode, nil
	case <-time.After(timeout):
		return time.Time{}, 0, fmt.Errorf("%s did not exit within %s", p.Name, timeout)
	}
}

// Signal sends sig to the process alone (not its group).
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	return nil
}

// SignalGroup sends sig to the process's whole group: the process and its
// children (vigil's engine adapter), as a terminal that closes sends SIGHUP
// to its foreground job. The process must not have been reaped: until then
// its pid names the group.
func (p *Proc) SignalGroup(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("signalling %s's group: it has exited", p.Name)
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil {
		return fmt.Errorf("signalling %s's group: %w", p.Name, err)
	}
	return nil
}

// Kill kills the whole process group and waits for the process to be
// reaped. Killing an exited process is a no-op.
func (p *Proc) Kill() {
	// Children killed with their parent are reaped by init, not by us, so
	// their CPU time would vanish from OwnCPU: it is counted here.
	members := groupMembers(p.Pid())
	orphanCPU.add(members)
	if !p.Exited() {
		// The leader is not reaped yet, so its pid still names our group.
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	} else {
		// The group may outlive its leader (an adapter after vigil
		// exits). The leader's pid is free for reuse now, so members are
		// killed one by one, never a process that now holds that pid.
		for _, pid := range members {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	select {
	case <-p.done:
	case <-time.After(killWait):
	}
}

// WaitLine waits until a line containing substr appears and returns it.
func (p *Proc) WaitLine(substr string, timeout time.Duration) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], substr) {
				line := p.lines[seen]
				p.mu.Unlock()
				return line, nil
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.scanned:
			// All output is in: one last look, then give up.
			if l := p.FindLine(substr); l != "" {
				return l, nil
			}
			return "", fmt.Errorf("%s ended its output (exited: %v) before logging %q; last lines:\n%s", p.Name, p.Exited(), substr, p.Tail(20))
		case <-deadline.C:
			return "", fmt.Errorf("%s did not log %q within %s; last lines:\n%s", p.Name, substr, timeout, p.Tail(20))
		}
	}
}

// FindLine returns the first line kept that contains substr, or "".
func (p *Proc) FindLine(substr string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// Output returns every output line kept.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Tail returns the last n output lines, for error messages.
func (p *Proc) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := max(0, len(p.lines)-n)
	return strings.Join(p.lines[from:], "\n")
}

// WaitCount waits until n lines containing substr have appeared.
func (p *Proc) WaitCount(substr string, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen, found := 0, 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], substr) {
				found++
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if found >= n {
			return nil
		}
		select {
		case <-changed:
		case <-p.scanned:
			if p.Count(substr) >= n {
				return nil
			}
			return fmt.Errorf("%s ended its output (exited: %v) with %d lines holding %q, want %d", p.Name, p.Exited(), found, substr, n)
		case <-deadline.C:
			return fmt.Errorf("%s logged %d lines holding %q within %s, want %d; last lines:\n%s", p.Name, found, substr, timeout, n, p.Tail(20))
		}
	}
}

// Count is the number of lines kept that contain substr.
func (p *Proc) Count(substr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
