package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// profileHz is perf's sampling rate for -profile: high enough for a
// useful profile from a 1 s row, low enough not to move the figures much.
const profileHz = 999

// profiler records CPU profiles of vigil (host and adapter) with Linux
// perf during the vigil path of each step-mode B5 row, when -profile is
// given. perf needs no support in vigil and sees both processes with the
// same clock; its call graphs use Go's frame pointers.
type profiler struct {
	dir string
}

// start begins recording pids (host, then adapter) into
// DIR/name.ROLE.perf.data and returns the function that stops perf and
// writes the reports beside them: name.host.txt and name.adapter.txt
// (flat, then with callers' inclusive time), from `perf report`.
func (p *profiler) start(name string, pids []int) (func() error, error) {
	if p == nil || p.dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	// One perf per process: perf report's --pid filter matches threads.
	type rec struct {
		cmd        *exec.Cmd
		data, text string
	}
	var recs []rec
	for i, role := range []string{"host", "adapter"} {
		if i >= len(pids) {
			break
		}
		data := filepath.Join(p.dir, name+"."+role+".perf.data")
		cmd := exec.Command("perf", "record", "-q", "-g", "-F", strconv.Itoa(profileHz), "-p", strconv.Itoa(pids[i]), "-o", data)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("-profile: perf record: %w", err)
		}
		recs = append(recs, rec{cmd, data, filepath.Join(p.dir, name+"."+role+".txt")})
	}
	time.Sleep(100 * time.Millisecond) // perf attaches before the load starts
	return func() error {
		for _, r := range recs {
			_ = r.cmd.Process.Signal(syscall.SIGINT)
		}
		for _, r := range recs {
			// perf ends on SIGINT by re-raising it, after writing its data.
			if err := r.cmd.Wait(); err != nil && !interrupted(err) {
				return fmt.Errorf("-profile: perf record: %w", err)
			}
			if err := perfReport(r.data, r.text); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// perfReport writes data's flat profile and then its profile with
// callers' inclusive time, as text.
func perfReport(data, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, args := range [][]string{
		{"--no-children", "--sort", "symbol", "-g", "none", "--percent-limit", "0.3"},
		{"--children", "--sort", "symbol", "-g", "none", "--percent-limit", "1"},
	} {
		cmd := exec.Command("perf", append([]string{"report", "-i", data, "--stdio"}, args...)...)
		cmd.Stderr = os.Stderr
		text, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("-profile: perf report: %w", err)
		}
		// perf pads every symbol to the longest and adds empty IPC columns.
		for line := range strings.Lines(string(text)) {
			line = strings.TrimRight(line, " \n")
			line = strings.TrimRight(strings.TrimSuffix(line, "-      -"), " ")
			if _, err := fmt.Fprintln(f, line); err != nil {
				return err
			}
		}
	}
	return nil
}

func interrupted(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}
