// Package harness starts and observes the real binaries (the Consul agent,
// mock engines, vigil workers and routers) as processes on loopback, for
// the end-to-end tests and the benchmarks. A Harness tracks the processes of
// a benchmark run and kills every one of them when the run ends, however it
// ends; the tests start processes through a Starter of their own.
package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Bins are the executables under test; Mocks holds each mock engine's by
// its binary name (Engine.Mock).
type Bins struct {
	Vigil, Consul string
	Mocks         map[string]string
}

// Starter starts a process: *Harness is one.
type Starter interface {
	Start(name string, env []string, bin string, args ...string) (*Proc, error)
}

// StderrStarter also starts a process with its stderr on a file of the
// caller's, as StartProcStderr: *Harness is one.
type StderrStarter interface {
	StartStderr(name string, env []string, stderr *os.File, bin string, args ...string) (*Proc, error)
}

// Harness starts processes and remembers them so that Close can kill them.
type Harness struct {
	Bins Bins
	// Dir is a scratch directory removed by Close (file registries live here).
	Dir string

	mu     sync.Mutex
	procs  []*Proc
	closed bool
}

// VigilPkg builds the vigil binary.
const VigilPkg = "github.com/vigilhq/vigil/host/cmd/vigil"

// New builds vigil and the mocks of engines from the workspace at root
// into a fresh scratch directory and finds the Consul agent. The binaries
// are built without -race: the figures are about vigil as it ships.
func New(root string, engines ...Engine) (*Harness, error) {
	dir, err := os.MkdirTemp("", "vigil-bench-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	h := &Harness{Dir: dir, Bins: Bins{Vigil: filepath.Join(dir, "vigil"), Mocks: map[string]string{}}}
	builds := map[string]string{h.Bins.Vigil: VigilPkg}
	for _, e := range engines {
		h.Bins.Mocks[e.Mock] = filepath.Join(dir, e.Mock)
		builds[h.Bins.Mocks[e.Mock]] = e.MockPkg
	}
	for bin, pkg := range builds {
		if err := goBuild(root, bin, pkg); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if h.Bins.Consul, err = ConsulBin(root); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return h, nil
}

func goBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	return nil
}

// ConsulBin is VIGIL_CONSUL_BIN, else the agent `make consul` builds into
// .bin at the repository root.
func ConsulBin(root string) (string, error) {
	p := os.Getenv("VIGIL_CONSUL_BIN")
	if p == "" {
		p = filepath.Join(root, ".bin", "consul")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no Consul agent at %s: run `make consul` or set VIGIL_CONSUL_BIN", p)
	}
	return p, nil
}

// RepoRoot is the nearest directory from the working directory upwards
// that holds go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work in the working directory or above: run from the vigil repository")
		}
		dir = parent
	}
}

// Start starts a process that Close will kill if it still runs.
func (h *Harness) Start(name string, env []string, bin string, args ...string) (*Proc, error) {
	return h.StartStderr(name, env, nil, bin, args...)
}

// StartStderr is Start with the process's stderr on stderr when it is not
// nil, as StartProcStderr.
func (h *Harness) StartStderr(name string, env []string, stderr *os.File, bin string, args ...string) (*Proc, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("harness closed")
	}
	p, err := StartProcStderr(name, env, stderr, bin, args...)
	if err != nil {
		return nil, err
	}
	h.procs = append(h.procs, p)
	return p, nil
}

// Close kills every process group started and removes the scratch
// directory. It is safe to call more than once and from a signal handler's
// goroutine.
func (h *Harness) Close() {
	h.mu.Lock()
	procs := h.procs
	h.procs, h.closed = nil, true
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Kill()
		}()
	}
	wg.Wait()
	os.RemoveAll(h.Dir)
}

// handedOut are the ports FreePort has returned in this run; none is
// returned twice, so that two processes of a run never race for one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback TCP port that was free a moment ago. It
// picks from below the kernel's ephemeral range: a port from bind(:0) lies
// inside that range, where the run's own outgoing connections (thousands
// of them) may take it as a local port before the process it was meant
// for binds it.
func FreePort() (int, error) {
	lo, hi := portRange()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", Addr(p))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in [%d, %d)", lo, hi)
}

// portRange is from 16384 to the start of the ephemeral range (Linux's
// default 32768, from /proc/sys/net/ipv4/ip_local_port_range).
func portRange() (lo, hi int) {
	lo, hi = 16384, 32768
	var start int
	if _, err := fmt.Sscanf(readFirstLine("/proc/sys/net/ipv4/ip_local_port_range"), "%d", &start); err == nil && start > lo+4096 {
		hi = start
	}
	return lo, hi
}

func readFirstLine(path string) string {
	b, _ := os.ReadFile(path)
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// FreeAddr is 127.0.0.1 with a FreePort.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return Addr(port), nil
}

// Addr is the loopback address with port.
func Addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
