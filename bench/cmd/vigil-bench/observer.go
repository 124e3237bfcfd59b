package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

// observeCmd is the hidden first argument that runs the driver as a
// Consul observer process (see observeMain).
const observeCmd = "observe-withdrawal"

// observeMain watches the passing list of a service with blocking queries
// until a worker has left it. It prints "armed" once its first answer is
// in and "gone <unix nanoseconds>" when the answer without the worker
// returns. B7 runs it as a process of its own because the driver is busy
// generating load then: an observer goroutine among 64 busy streams is
// scheduled late, a mostly idle process is woken at once.
func observeMain(args []string) int {
	fs := flag.NewFlagSet(observeCmd, flag.ContinueOnError)
	addr := fs.String("consul", "", "Consul HTTP address")
	service := fs.String("service", "", "service name")
	worker := fs.String("worker", "", "worker id whose withdrawal to time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client, err := api.NewClient(&api.Config{Address: *addr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		return 1
	}
	c := &harness.Consul{Addr: *addr, Client: client}
	ctx, cancel := context.WithTimeout(context.Background(), observeTimeout)
	defer cancel()
	obs := c.Observe(ctx, *service, func(entries []*api.ServiceEntry) bool { return !hasWorker(entries, *worker) })
	fmt.Println("armed")
	at, err := obs.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		return 1
	}
	fmt.Println("gone", at.UnixNano())
	return 0
}

// observeWithdrawal starts an observer process for workerID leaving
// service and waits until it is armed.
func (e *env) observeWithdrawal(service, workerID string) (*harness.Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the driver's executable: %w", err)
	}
	p, err := e.h.Start("observer", nil, self, observeCmd, "-consul", e.consul.Addr, "-service", service, "-worker", workerID)
	if err != nil {
		return nil, err
	}
	if _, err := p.WaitLine("armed", harness.StartTimeout); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// withdrawnAt waits for the observer's answer.
func withdrawnAt(p *harness.Proc) (time.Time, error) {
	line, err := p.WaitLine("gone ", observeTimeout)
	if err != nil {
		return time.Time{}, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "gone ")), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("observer said %q: %w", line, err)
	}
	return time.Unix(0, ns), nil
}
