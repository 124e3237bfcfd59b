package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// proc is a process under test, a harness.Proc that fails the test instead
// of returning errors.
type proc struct {
	*harness.Proc
	t testing.TB
}

// startProc starts bin with args; the process is killed at the end of the
// test if it is still running, and its output is logged when the test fails.
func startProc(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, bin, args...)
}

func startProcEnv(t testing.TB, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	return startProcStderr(t, name, env, nil, bin, args...)
}

// startProcStderr is startProcEnv with the process's stderr on stderr when
// it is not nil (see harness.StartProcStderr).
func startProcStderr(t testing.TB, name string, env []string, stderr *os.File, bin string, args ...string) *proc {
	t.Helper()
	// A race-enabled binary sleeps 1s at exit by default (to let other
	// goroutines report); that would count against exit-time bounds. A race
	// found still changes the exit code to 66.
	env = append(append([]string(nil), env...), "GORACE=atexit_sleep_ms=0")
	hp, err := harness.StartProcStderr(name, env, stderr, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Proc: hp, t: t}
	t.Cleanup(func() {
		hp.Kill()
		select {
		case <-hp.OutputDone():
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("--- output of %s (exit %d):\n%s", name, hp.ExitCode(), hp.Output())
		}
	})
	return p
}

// starter starts the harness's processes as the test's.
type starter struct{ t testing.TB }

func (s starter) Start(name string, env []string, bin string, args ...string) (*harness.Proc, error) {
	return startProcEnv(s.t, name, env, bin, args...).Proc, nil
}

func (s starter) StartStderr(name string, env []string, stderr *os.File, bin string, args ...string) (*harness.Proc, error) {
	return startProcStderr(s.t, name, env, stderr, bin, args...).Proc, nil
}

func (p *proc) pid() int       { return p.Pid() }
func (p *proc) exited() bool   { return p.Exited() }
func (p *proc) exitCode() int  { return p.ExitCode() }
func (p *proc) output() string { return p.Output() }

func (p *proc) findLine(substr string) string { return p.FindLine(substr) }

// waitLine waits until a line containing substr appears and returns it.
func (p *proc) waitLine(substr string, timeout time.Duration) string {
	p.t.Helper()
	line, err := p.WaitLine(substr, timeout)
	if err != nil {
		p.t.Fatal(err)
	}
	return line
}

// wait waits for the process to exit and its output to end, and returns its
// exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	_, code, err := p.Wait(timeout)
	if err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.OutputDone():
	case <-time.After(time.Until(deadline)):
		p.t.Fatalf("%s did not close its output within %s", p.Name, timeout)
	}
	return code
}

// exits waits for the process to exit with code and fails the test unless
// its output holds each of says; it returns the output.
func (p *proc) exits(code int, timeout time.Duration, says ...string) string {
	p.t.Helper()
	if got := p.wait(timeout); got != code {
		p.t.Fatalf("exit code = %d, want %d", got, code)
	}
	out := p.output()
	for _, s := range says {
		if !strings.Contains(out, s) {
			p.t.Errorf("output does not hold %q:\n%s", s, out)
		}
	}
	return out
}

// signal sends sig to the process alone, not its process group.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

func children(pid int) []int { return harness.Children(pid) }
func alive(pid int) bool     { return harness.Alive(pid) }
