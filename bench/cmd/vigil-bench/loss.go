package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
)

// lossTrialsFull is B1's (and B4's) trial count per case.
const lossTrialsFull = 50

// observeTimeout bounds each wait for discovery to reach an expected state
// while something is measured; a trial that exceeds it fails.
const observeTimeout = 30 * time.Second

// exitTimeout bounds the wait for vigil's exit after a loss: the default
// 5s grace period with nothing in flight, plus slack.
const exitTimeout = 30 * time.Second

// lossCase is one way of losing the engine, seen in one discovery backend.
type lossCase struct {
	name   string
	consul bool // Consul, else the file registry
	kill   bool // SIGKILL the engine, else turn its health NOT_SERVING
}

var lossCases = []lossCase{
	{"Consul, NOT_SERVING", true, false},
	{"file registry, NOT_SERVING", false, false},
	{"Consul, SIGKILL", true, true},
	{"file registry, SIGKILL", false, true},
}

// lossSample is one trial, both times from the loss.
type lossSample struct {
	withdrawn, exited time.Duration
}

// lossResults are the trials of every case, by case name, and how many
// trials of each were run again because they went wrong (see errEarly).
type lossResults struct {
	samples  map[string][]lossSample
	repeated map[string]int
}

// metric names a case's row for engine b, noting repeated trials.
func (r *lossResults) metric(prefix string, c lossCase, b benchEngine) string {
	m := b.lossMetric(c, prefix+c.name)
	if n := r.repeated[c.name]; n > 0 {
		m += fmt.Sprintf("; %d trials repeated: worker left discovery before the loss", n)
	}
	return m
}

func figB1(e *env) ([]report.Row, error) {
	res, err := e.lossTrials()
	if err != nil {
		return nil, err
	}
	var rows []report.Row
	for _, c := range lossCases {
		s := durations(res.samples[c.name], func(l lossSample) time.Duration { return l.withdrawn })
		rows = append(rows, report.SummaryRow("B1", res.metric("loss→withdrawn, ", c, e.engine), s,
			e.engine.lossTarget(c, "p99 ", 10*time.Millisecond)))
	}
	return rows, nil
}

func figB4(e *env) ([]report.Row, error) {
	res, err := e.lossTrials()
	if err != nil {
		return nil, err
	}
	var rows []report.Row
	for _, c := range lossCases {
		s := durations(res.samples[c.name], func(l lossSample) time.Duration { return l.exited })
		rows = append(rows, report.SummaryRow("B4", res.metric("loss→exit, ", c, e.engine), s,
			e.engine.lossTarget(c, "", 50*time.Millisecond)))
	}
	return rows, nil
}

func durations[T any](samples []T, pick func(T) time.Duration) []time.Duration {
	d := make([]time.Duration, len(samples))
	for i, s := range samples {
		d[i] = pick(s)
	}
	return d
}

// lossTrials runs B1's trials once for both B1 and B4. The cases take
// turns, so that drift over the run (page cache, Consul's growing index)
// touches all of them alike.
func (e *env) lossTrials() (*lossResults, error) {
	if e.loss != nil {
		return e.loss, nil
	}
	n := e.trials(lossTrialsFull)
	res := &lossResults{samples: map[string][]lossSample{}, repeated: map[string]int{}}
	for i := range n {
		for _, c := range lossCases {
			s, repeats, err := repeatEarly(func() (lossSample, error) { return lossTrial(e, c) })
			res.repeated[c.name] += repeats
			if err != nil {
				return nil, fmt.Errorf("%s, trial %d: %w", c.name, i+1, err)
			}
			res.samples[c.name] = append(res.samples[c.name], s)
		}
		if (i+1)%10 == 0 {
			progress("  loss trials: %d of %d per case", i+1, n)
		}
	}
	e.loss = res
	return res, nil
}

// lossTrial starts an engine and a vigil, waits until the worker is
// registered, loses the engine and times the withdrawal and vigil's exit.
func lossTrial(e *env, c lossCase) (lossSample, error) {
	m, err := e.startMock("")
	if err != nil {
		return lossSample{}, err
	}
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return lossSample{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout)
	defer cancel()
	v, gone, err := e.registeredWorker(ctx, m.GRPC, c.consul)
	if err != nil {
		return lossSample{}, err
	}
	defer v.Kill()
	// A polled engine's unhealthy answer is seen at the next poll. The
	// registration follows a poll closely, so a loss at a fixed time after
	// it would always fall at one point of the interval; at a random
	// point instead, the trials span the interval.
	if iv := e.engine.pollInterval; iv > 0 && !c.kill {
		time.Sleep(rand.N(iv))
	}

	lost, err := loseEngine(m, c.kill)
	if err != nil {
		return lossSample{}, err
	}
	withdrawn, err := gone.Wait()
	if err != nil {
		return lossSample{}, fmt.Errorf("observing the withdrawal: %w", err)
	}
	if withdrawn.Before(lost) {
		return lossSample{}, fmt.Errorf("%w, by %s", errEarly, lost.Sub(withdrawn))
	}
	exited, code, err := v.Wait(exitTimeout)
	if err != nil {
		return lossSample{}, err
	}
	if code != 1 {
		return lossSample{}, fmt.Errorf("vigil exited %d after the loss, want 1; last lines:\n%s", code, v.Tail(20))
	}
	return lossSample{withdrawn: withdrawn.Sub(lost), exited: exited.Sub(lost)}, nil
}

// errEarly marks a trial whose observer saw the worker leave discovery
// before the engine was lost: the trial measured nothing. In a few of
// several hundred registrations here, Consul's passing list dropped a new
// worker for about a millisecond, within 2 ms of first listing it (cause
// not found; vigil registers the service and its passing check in one
// call); an observer armed in that window sees the drop.
var errEarly = errors.New("the worker left discovery before the engine was lost")

// maxRepeats bounds how many trials of one kind repeatEarly runs again.
const maxRepeats = 5

// repeatEarly runs trial, and runs it again while it fails with errEarly,
// up to maxRepeats times; it returns how many times it repeated.
func repeatEarly[T any](trial func() (T, error)) (T, int, error) {
	for repeats := 0; ; repeats++ {
		v, err := trial()
		if !errors.Is(err, errEarly) || repeats == maxRepeats {
			return v, repeats, err
		}
		progress("  repeating a trial: %v", err)
	}
}

// registrationSettle is how long a trial lets a new registration settle
// before arming its withdrawal observer, to stay clear of the brief drop
// errEarly describes (seen within 2 ms of the first listing).
const registrationSettle = 50 * time.Millisecond

// registeredWorker starts vigil against the engine, extra flags after the
// harness's, waits until its worker is registered (passing in Consul, or
// its record present), and returns with an observer of its withdrawal
// already armed.
func (e *env) registeredWorker(ctx context.Context, engineAddr string, consul bool, extra ...string) (*harness.Vigil, *harness.Observation, error) {
	opts := harness.VigilOpts{EngineAddr: engineAddr, Extra: extra}
	if consul {
		opts.Consul, opts.Service = e.consul, e.service("loss")
	} else {
		dir, err := e.fileRegistry()
		if err != nil {
			return nil, nil, err
		}
		opts.RegistryDir, opts.Service = dir, "llm"
	}
	v, err := e.startVigil(opts)
	if err != nil {
		return nil, nil, err
	}
	if consul {
		if _, err := e.consul.WaitPassing(opts.Service, harness.Count(1), observeTimeout); err != nil {
			v.Kill()
			return nil, nil, fmt.Errorf("%w; vigil's last lines:\n%s", err, v.Tail(20))
		}
		time.Sleep(registrationSettle)
		return v, e.consul.Observe(ctx, opts.Service, harness.Count(0)), nil
	}
	path := v.RecordPath(opts.RegistryDir, opts.Service)
	if _, err := harness.WaitFile(path, observeTimeout); err != nil {
		v.Kill()
		return nil, nil, fmt.Errorf("%w; vigil's last lines:\n%s", err, v.Tail(20))
	}
	time.Sleep(registrationSettle) // the same pace as the Consul cases
	return v, harness.ObserveFileGone(ctx, path), nil
}

// loseEngine turns the engine NOT_SERVING and returns the time the mock
// recorded for the change, or SIGKILLs it and returns the time just before
// the kill syscall.
func loseEngine(m *harness.Mock, kill bool) (time.Time, error) {
	if kill {
		at := time.Now()
		return at, m.Signal(syscall.SIGKILL)
	}
	if err := m.SetHealth("NOT_SERVING"); err != nil {
		return time.Time{}, err
	}
	return m.LastHealthChange()
}
