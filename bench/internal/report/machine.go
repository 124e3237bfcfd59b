package report

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	Date      string `json:"date"`
	Cores     int    `json:"cores"`
	CPU       string `json:"cpu"`
	MemoryKiB int64  `json:"memory_kib"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	Commit    string `json:"commit"`
	// Sharing says how the processes of the run shared the cores.
	Sharing string `json:"sharing"`
}

// DescribeMachine reads the machine from /proc and the toolchain; a field
// it cannot read stays empty. root is the repository, for the commit.
func DescribeMachine(root string) Machine {
	m := Machine{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Cores:     runtime.NumCPU(),
		CPU:       procField("/proc/cpuinfo", "model name"),
		Kernel:    strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		GoVersion: runtime.Version(),
	}
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		fmt.Sscanf(kb, "%d", &m.MemoryKiB)
	}
	if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	m.Sharing = fmt.Sprintf("every process (the driver and its load generator, Consul, the mock engines, vigil "+
		"and its adapter child, vigil route) ran on the same %d cores with no CPU pinning or priorities, "+
		"each Go program with the default GOMAXPROCS (%d)", m.Cores, m.Cores)
	return m
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Markdown renders the machine as a list.
func (m Machine) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- date: %s\n", m.Date)
	fmt.Fprintf(&b, "- cores: %d (%s)\n", m.Cores, orDash(m.CPU))
	fmt.Fprintf(&b, "- memory: %.1f GiB\n", float64(m.MemoryKiB)/(1<<20))
	fmt.Fprintf(&b, "- kernel: %s\n", orDash(m.Kernel))
	fmt.Fprintf(&b, "- Go: %s\n", m.GoVersion)
	fmt.Fprintf(&b, "- commit: %s\n", orDash(m.Commit))
	fmt.Fprintf(&b, "- core sharing: %s\n", m.Sharing)
	return b.String()
}
