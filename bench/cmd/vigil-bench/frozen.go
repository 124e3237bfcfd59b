package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// frozenTrialsFull is B3's trial count; each takes about the detection
// time itself (seconds), so fewer trials than B1.
const frozenTrialsFull = 5

func figB3(e *env) ([]report.Row, error) {
	return frozenRows(e, "B3", "SIGSTOP of the engine→withdrawn from Consul, default health settings", "3 s", frozenTrial)
}

// frozenRows runs trial as B3, B9 and B10 do, repeating a trial whose
// worker left discovery before the freeze, and summarises the samples as
// fig beside target.
func frozenRows(e *env, fig, metric, target string, trial func(*env) (time.Duration, error)) ([]report.Row, error) {
	n := e.trials(frozenTrialsFull)
	samples := make([]time.Duration, 0, n)
	var repeated int
	for i := range n {
		d, repeats, err := repeatEarly(func() (time.Duration, error) { return trial(e) })
		repeated += repeats
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", i+1, err)
		}
		samples = append(samples, d)
	}
	if repeated > 0 {
		metric += fmt.Sprintf("; %d trials repeated: worker left discovery before the freeze", repeated)
	}
	return []report.Row{report.SummaryRow(fig, metric, samples, target)}, nil
}

// frozenTrial stops the engine process (its connections stay open, so
// only the liveness checks can notice) and times until the worker leaves
// Consul's passing list.
func frozenTrial(e *env) (time.Duration, error) {
	m, err := e.startMock("")
	if err != nil {
		return 0, err
	}
	// SIGKILL ends a stopped process too; Kill runs last, after vigil's.
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout)
	defer cancel()
	v, gone, err := e.registeredWorker(ctx, m.GRPC, true)
	if err != nil {
		return 0, err
	}
	defer v.Kill()
	return freezeUntilGone(m, v, gone, func() error { return nil })
}

// freezeUntilGone stops the engine process m and times until the worker
// vigil v registered leaves Consul's passing list (gone). A withdrawal
// before the freeze is errEarly (a trial to repeat), unless early says
// what made it.
func freezeUntilGone(m *harness.Mock, v *harness.Vigil, gone *harness.Observation, early func() error) (time.Duration, error) {
	frozen := time.Now()
	if err := m.Signal(syscall.SIGSTOP); err != nil {
		return 0, err
	}
	at, err := gone.Wait()
	if err != nil {
		return 0, fmt.Errorf("observing the withdrawal: %w; vigil's last lines:\n%s", err, v.Tail(20))
	}
	if at.Before(frozen) {
		if err := early(); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w, by %s", errEarly, frozen.Sub(at))
	}
	return at.Sub(frozen), nil
}
