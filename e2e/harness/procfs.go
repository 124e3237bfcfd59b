package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 on every mainstream architecture (sysconf would
// need cgo). It makes CPU readings 10ms coarse, so the bench reads them over
// whole rows of seconds, never per request.
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/PID/stat the bench reads.
type procStat struct {
	state          byte
	ppid, pgrp     int
	utime, stime   uint64 // clock ticks
	cutime, cstime uint64 // of reaped children, clock ticks
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces: fields
	// proper start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15, cutime 16,
	// cstime 17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var s procStat
	s.state = f[0][0]
	s.ppid, _ = strconv.Atoi(f[1])
	s.pgrp, _ = strconv.Atoi(f[2])
	s.utime, _ = strconv.ParseUint(f[11], 10, 64)
	s.stime, _ = strconv.ParseUint(f[12], 10, 64)
	s.cutime, _ = strconv.ParseUint(f[13], 10, 64)
	s.cstime, _ = strconv.ParseUint(f[14], 10, 64)
	return s, nil
}

// allStats reads the stat of every process visible in /proc.
func allStats() map[int]procStat {
	entries, _ := os.ReadDir("/proc")
	out := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil {
			out[pid] = s
		}
	}
	return out
}

// Tree is pid and its descendants (vigil and its engine adapter).
func Tree(pid int) []int {
	stats := allStats()
	children := make(map[int][]int)
	for p, s := range stats {
		children[s.ppid] = append(children[s.ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// Children are the direct children of pid, zombies included.
func Children(pid int) []int {
	var out []int
	for p, s := range allStats() {
		if s.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// Alive reports whether pid names a process that has not exited (a zombie
// counts as exited).
func Alive(pid int) bool {
	s, err := readStat(pid)
	return err == nil && s.state != 'Z'
}

// CPUTime is the user plus system CPU time the processes have used so far.
// A process that has gone is skipped.
func CPUTime(pids []int) time.Duration {
	var ticks uint64
	for _, pid := range pids {
		if s, err := readStat(pid); err == nil {
			ticks += s.utime + s.stime
		}
	}
	return time.Duration(ticks) * clockTick
}

// OwnCPU is the CPU time used so far by this process and every process it
// started, running or reaped: a reaped child's time has moved into its
// parent's cutime and cstime, so each process counts its own time and its
// reaped children's.
func OwnCPU() time.Duration {
	return (cpuTicks(Tree(os.Getpid())) + orphanCPU.get()) * clockTick
}

// cpuTicks sums the processes' CPU time and their reaped children's.
func cpuTicks(pids []int) time.Duration {
	var ticks uint64
	for _, pid := range pids {
		if s, err := readStat(pid); err == nil {
			ticks += s.utime + s.stime + s.cutime + s.cstime
		}
	}
	return time.Duration(ticks)
}

// orphanCPU is the CPU time of processes Kill took down with their parent:
// init reaps them, so no cutime of ours ever holds it.
var orphanCPU ticksCounter

type ticksCounter struct {
	mu    sync.Mutex
	ticks time.Duration
}

func (c *ticksCounter) add(pids []int) {
	t := cpuTicks(pids)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks += t
}

func (c *ticksCounter) get() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ticks
}

// MachineCPU is the busy time of all cores so far, from /proc/stat: user,
// nice, system, irq, softirq and steal.
func MachineCPU() time.Duration {
	f := strings.Fields(readFirstLine("/proc/stat"))
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseUint(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * clockTick
}

// RSS is the summed resident set size (VmRSS) of the processes, in bytes.
func RSS(pids []int) (int64, error) {
	var total int64
	for _, pid := range pids {
		kb, err := vmRSS(pid)
		if err != nil {
			return 0, err
		}
		total += kb * 1024
	}
	return total, nil
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// GroupMembers are the live processes in process group pgrp other than
// its leader: those a process the harness started (its group's leader)
// left behind once it has exited, such as vigil's engine adapter.
func GroupMembers(pgrp int) []int { return groupMembers(pgrp) }

// groupMembers are the live processes in process group pgrp other than
// its leader.
func groupMembers(pgrp int) []int {
	var out []int
	for pid, s := range allStats() {
		if s.pgrp == pgrp && pid != pgrp && s.state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}
