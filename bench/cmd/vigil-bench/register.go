package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

const (
	// readyTrialsFull is B2's trial count.
	readyTrialsFull = 20
	// downFull is how long B2's engines stay down: long enough for vigil's
	// retry backoff to sit at its cap (--engine-retry-max) however the
	// backoff grows. Quick mode cuts it to downQuick.
	downFull  = 30 * time.Second
	downQuick = 3 * time.Second
	// startTrialsFull is B6's start-to-registered trial count.
	startTrialsFull = 10
)

func figB2(e *env) ([]report.Row, error) {
	n, down := e.trials(readyTrialsFull), e.pick(downFull, downQuick)
	waiting, err := e.waitingWorkers(n)
	defer func() {
		for _, w := range waiting {
			w.v.Kill()
		}
	}()
	if err != nil {
		return nil, err
	}
	// One more vigil waits on a listener standing in for the down engine,
	// which counts its connection attempts.
	counter, err := newAcceptCounter()
	if err != nil {
		return nil, err
	}
	defer counter.Close()
	cw, err := e.waitingWorker(counter.Addr().String())
	if cw.v != nil {
		defer cw.v.Kill()
	}
	if err != nil {
		return nil, err
	}
	// All trials share one down period: the vigils wait side by side, and
	// the engines then come up one at a time so each is measured alone.
	progress("  %d vigils waiting for engines that stay down %s", n, down)
	var pids []int
	for _, w := range waiting {
		pids = append(pids, harness.Tree(w.v.Pid())...) // vigil and its adapter
	}
	cpu0, attempts0, t0 := harness.CPUTime(pids), counter.Count(), time.Now()
	time.Sleep(down)
	cpu, attempts, waited := harness.CPUTime(pids)-cpu0, counter.Count()-attempts0, time.Since(t0)
	cw.v.Kill()
	samples := make([]time.Duration, 0, n)
	for i, w := range waiting {
		d, err := readyTrial(e, w)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", i+1, err)
		}
		samples = append(samples, d)
		w.v.Kill() // one process fewer sharing the cores with the next trial
	}
	metric := fmt.Sprintf("engine serving→passing in Consul, after %s down", down)
	perSec := float64(attempts) / waited.Seconds()
	cpuPerMin := time.Duration(float64(cpu) / float64(n) * float64(time.Minute) / float64(waited))
	return []report.Row{
		report.SummaryRow("B2", metric, samples, "p99 100 ms"),
		{Figure: "B2", Metric: "waiting for a down engine: connection attempts per second (one vigil)",
			Value: fmt.Sprintf("%.1f/s", perSec), Data: map[string]float64{"attempts_per_second": perSec, "attempts": float64(attempts), "seconds": waited.Seconds()}},
		{Figure: "B2", Metric: fmt.Sprintf("waiting for a down engine: CPU of vigil + adapter per minute (mean of %d)", n),
			Value: fmt.Sprintf("%.0f ms", report.Ms(cpuPerMin)), Data: map[string]float64{"cpu_ms_per_minute": report.Ms(cpuPerMin)}},
	}, nil
}

// acceptCounter is a listener standing in for a down engine: it accepts
// each connection, counts it and closes it at once, so a client sees a
// failed connection attempt, as from an engine that is not listening.
type acceptCounter struct {
	net.Listener
	n atomic.Int64
}

func newAcceptCounter() (*acceptCounter, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &acceptCounter{Listener: l}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return c, nil
}

// Count is the number of connections accepted so far.
func (c *acceptCounter) Count() int64 { return c.n.Load() }

// waitingWorker is a vigil waiting for an engine that is not running.
type waitingWorker struct {
	engineAddr, service string
	v                   *harness.Vigil
}

// waitingWorkers starts n vigils against free ports where no engine
// listens and waits until each says it is waiting for its engine. It
// returns the ones started even on error, for the caller to kill.
func (e *env) waitingWorkers(n int) ([]waitingWorker, error) {
	var out []waitingWorker
	for range n {
		addr, err := harness.FreeAddr()
		if err != nil {
			return out, err
		}
		w, err := e.startWaiting(addr)
		if w.v != nil {
			out = append(out, w)
		}
		if err != nil {
			return out, err
		}
	}
	for _, w := range out {
		if _, err := w.v.WaitLine("waiting for engine", harness.StartTimeout); err != nil {
			return out, err
		}
	}
	return out, nil
}

// waitingWorker starts one vigil for an engine at addr and waits until it
// says it is waiting for its engine; w.v is set whenever it started.
func (e *env) waitingWorker(addr string) (waitingWorker, error) {
	w, err := e.startWaiting(addr)
	if err != nil {
		return w, err
	}
	_, err = w.v.WaitLine("waiting for engine", harness.StartTimeout)
	return w, err
}

func (e *env) startWaiting(addr string) (waitingWorker, error) {
	svc := e.service("ready")
	v, err := e.startVigil(harness.VigilOpts{EngineAddr: addr, Consul: e.consul, Service: svc})
	if err != nil {
		return waitingWorker{}, err
	}
	return waitingWorker{engineAddr: addr, service: svc, v: v}, nil
}

// readyTrial brings w's engine up and times from the moment the mock
// turned SERVING to the worker passing in Consul.
func readyTrial(e *env, w waitingWorker) (time.Duration, error) {
	if w.v.Exited() {
		return 0, fmt.Errorf("vigil exited while its engine was down; last lines:\n%s", w.v.Tail(20))
	}
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout)
	defer cancel()
	obs := e.consul.Observe(ctx, w.service, harness.Count(1))
	select {
	case <-obs.Done():
		// Passing before the engine even started: the trial is broken.
		_, err := obs.Wait()
		return 0, fmt.Errorf("worker passing before its engine started (observer error: %v)", err)
	default:
	}
	m, err := e.startMock(w.engineAddr)
	if err != nil {
		return 0, err
	}
	defer m.Kill()
	// With no startup delay the mock turns SERVING as it starts; it
	// records that moment.
	ready, err := m.LastHealthChange()
	if err != nil {
		return 0, err
	}
	at, err := obs.Wait()
	if err != nil {
		return 0, fmt.Errorf("%w; vigil's last lines:\n%s", err, w.v.Tail(20))
	}
	return at.Sub(ready), nil
}

// startTrials times B6's start to registered: the engine already serves,
// and the clock runs from just before `vigil run` starts to the worker
// passing in Consul.
func (e *env) startTrials() ([]time.Duration, error) {
	n := e.trials(startTrialsFull)
	out := make([]time.Duration, 0, n)
	for i := range n {
		d, err := startTrial(e)
		if err != nil {
			return nil, fmt.Errorf("start trial %d: %w", i+1, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func startTrial(e *env) (time.Duration, error) {
	m, err := e.startMock("")
	if err != nil {
		return 0, err
	}
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return 0, err
	}
	svc := e.service("start")
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout)
	defer cancel()
	obs := e.consul.Observe(ctx, svc, harness.Count(1))
	v, err := e.startVigil(harness.VigilOpts{EngineAddr: m.GRPC, Consul: e.consul, Service: svc})
	if err != nil {
		return 0, err
	}
	defer v.Kill()
	at, err := obs.Wait()
	if err != nil {
		return 0, fmt.Errorf("%w; vigil's last lines:\n%s", err, v.Tail(20))
	}
	return at.Sub(v.Started), nil
}
