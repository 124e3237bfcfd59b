package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// quickBusyTimeout is B10's --health-busy-timeout in quick mode: its lease
// of a third keeps the trial at a few seconds; the full run keeps the
// default (30 s), whose 10 s lease is what the figure is about.
const quickBusyTimeout = 3 * time.Second

// figB10 times a freeze that follows a busy episode to the worker's
// withdrawal. The engine's health checks answer past --health-timeout
// while its transport answers PINGs, so vigil reports it busy and keeps
// it registered; then the engine is stopped.
func figB10(e *env) ([]report.Row, error) {
	policy := sdk.HealthPolicy{}
	metric := "busy episode, then SIGSTOP of the engine→withdrawn from Consul, default health settings"
	if e.quick {
		policy.BusyTimeout = quickBusyTimeout
		metric += ", --health-busy-timeout " + quickBusyTimeout.String()
	}
	policy = policy.WithDefaults()
	// Four digits: the default bound is 12.75 s.
	target := fmt.Sprintf("%.4g s", busyFrozenBound(policy).Seconds())
	return frozenRows(e, "B10", metric, target, func(e *env) (time.Duration, error) { return busyFrozenTrial(e, policy) })
}

// busyFrozenBound is how long an engine frozen just after a busy PING was
// answered may take to be found: the PING's lease (BusyTimeout /
// MaxBusyPings: timed-out checks within it are busy, nothing is sent),
// then a frozen engine's bound from the lease's end: the first check to
// time out after it (within Interval + Timeout), its PING left unanswered
// (Timeout/4), and Failures-1 more checks run back to back, each timing
// out.
func busyFrozenBound(p sdk.HealthPolicy) time.Duration {
	lease := p.BusyTimeout / healthwatch.MaxBusyPings
	return lease + p.Interval + p.Timeout + p.Timeout/4 + time.Duration(p.Failures-1)*p.Timeout
}

// busyFrozenTrial makes the engine busy (its checks answer in twice the
// health timeout), waits until vigil reports it busy with the worker still
// registered, freezes the engine at once (a full lease ahead: the worst
// case) and times until the worker leaves Consul's passing list.
func busyFrozenTrial(e *env, policy sdk.HealthPolicy) (time.Duration, error) {
	m, err := e.startMock("")
	if err != nil {
		return 0, err
	}
	defer m.Kill() // SIGKILL ends a stopped process too
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout+busyFrozenBound(policy))
	defer cancel()
	v, gone, err := e.registeredWorker(ctx, m.GRPC, true, "--health-busy-timeout", policy.BusyTimeout.String())
	if err != nil {
		return 0, err
	}
	defer v.Kill()
	if err := m.Post("/check-latency", map[string]string{"latency": (2 * policy.Timeout).String()}); err != nil {
		return 0, fmt.Errorf("slowing the engine's checks: %w", err)
	}
	if _, err := v.WaitLine("engine busy", observeTimeout); err != nil {
		return 0, fmt.Errorf("vigil did not report the busy engine: %w", err)
	}
	return freezeUntilGone(m, v, gone, func() error {
		if lost := v.FindLine("engine lost"); lost != "" {
			return fmt.Errorf("withdrawn while the engine was busy, before the freeze: %s", lost)
		}
		return nil
	})
}
