package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// figB9 times a frozen adapter to the worker's withdrawal: vigil's pings
// of the adapter (go-plugin's health service) under the default health
// policy, interval + failures × timeout = 2.5 s, are all that notice it.
// The pings do not depend on the engine: it runs with the first alone.
func figB9(e *env) ([]report.Row, error) {
	return frozenRows(e, "B9", "SIGSTOP of the adapter process→withdrawn from Consul, default health settings", "3 s", frozenAdapterTrial)
}

// frozenAdapterTrial stops vigil's adapter child (its connections stay
// open, so only vigil's pings can notice) and times until the worker
// leaves Consul's passing list.
func frozenAdapterTrial(e *env) (time.Duration, error) {
	m, err := e.startMock("")
	if err != nil {
		return 0, err
	}
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
	adapters := harness.Children(v.Pid())
	if len(adapters) != 1 {
		return 0, fmt.Errorf("vigil has %d child processes, want its adapter alone", len(adapters))
	}
	// SIGKILL ends a stopped process too, should vigil not have.
	defer func() { _ = syscall.Kill(adapters[0], syscall.SIGKILL) }()
	frozen := time.Now()
	if err := syscall.Kill(adapters[0], syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("stopping the adapter: %w", err)
	}
	at, err := gone.Wait()
	if err != nil {
		return 0, fmt.Errorf("observing the withdrawal: %w; vigil's last lines:\n%s", err, v.Tail(20))
	}
	if at.Before(frozen) {
		return 0, fmt.Errorf("%w, by %s", errEarly, frozen.Sub(at))
	}
	return at.Sub(frozen), nil
}
