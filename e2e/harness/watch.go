package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// Absent is the InstanceState.Status of an instance no longer listed.
const Absent = "absent"

// InstanceState is how one answer of a Watch showed one instance of a
// service.
type InstanceState struct {
	// At is when the answer came.
	At time.Time
	// ServiceID is the instance's Consul service id.
	ServiceID string
	// Status is aggregated over the instance's checks, its node's
	// included: passing, warning or critical; Absent once it is no
	// longer listed.
	Status string
	// ModifyIndex is the highest ModifyIndex of its checks: a check that
	// turned critical and back between two answers still moves it.
	ModifyIndex uint64
}

func (s InstanceState) String() string {
	return fmt.Sprintf("%s %s %s (modify index %d)", s.At.Format(time.StampMilli), s.ServiceID, s.Status, s.ModifyIndex)
}

// Watch follows every instance of a service, passing or not, with
// blocking queries on one agent, and keeps each state an instance was
// seen in. Its queries allow stale reads, so it keeps answering while the
// cluster has no leader; a failed query is asked again.
type Watch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	history  []InstanceState
	last     map[string]InstanceState
	failures int
}

// Watch starts following service's instances through c's agent and
// returns once it has the first answer, so that a change made after it
// returns is seen as a change.
func (c *Consul) Watch(service string) (*Watch, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{cancel: cancel, done: make(chan struct{}), last: map[string]InstanceState{}}
	first := make(chan error, 1)
	go w.run(ctx, c.Client.Health(), service, first)
	select {
	case err := <-first:
		if err != nil {
			cancel()
			<-w.done
			return nil, err
		}
		return w, nil
	case <-time.After(StartTimeout):
		cancel()
		<-w.done
		return nil, fmt.Errorf("watching %s: no answer within %s", service, StartTimeout)
	}
}

func (w *Watch) run(ctx context.Context, health *api.Health, service string, first chan<- error) {
	defer close(w.done)
	var index uint64
	answered := false
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: blockingWait, AllowStale: true}).WithContext(ctx)
		entries, meta, err := health.Service(service, "", false, q)
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.mu.Lock()
			w.failures++
			w.mu.Unlock()
			// The agent may be restarting, or its server gone: ask again
			// from the start after a pause.
			index = 0
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.record(now, entries)
		if !answered {
			answered = true
			first <- nil
		}
		if meta.LastIndex < index {
			index = 0 // another server, further behind: start over
		} else {
			index = meta.LastIndex
		}
	}
}

func (w *Watch) record(at time.Time, entries []*api.ServiceEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	listed := map[string]bool{}
	for _, e := range entries {
		if e == nil || e.Service == nil {
			continue
		}
		s := InstanceState{At: at, ServiceID: e.Service.ID, Status: e.Checks.AggregatedStatus()}
		for _, c := range e.Checks {
			s.ModifyIndex = max(s.ModifyIndex, c.ModifyIndex)
		}
		listed[s.ServiceID] = true
		w.add(s)
	}
	for id, s := range w.last {
		if !listed[id] && s.Status != Absent {
			w.add(InstanceState{At: at, ServiceID: id, Status: Absent})
		}
	}
}

// add keeps s when it differs from the instance's last state.
func (w *Watch) add(s InstanceState) {
	if l, ok := w.last[s.ServiceID]; ok && l.Status == s.Status && l.ModifyIndex == s.ModifyIndex {
		return
	}
	w.last[s.ServiceID] = s
	w.history = append(w.history, s)
}

// Stop ends the watch and returns every state seen, in the order seen,
// and how many queries failed.
func (w *Watch) Stop() ([]InstanceState, int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]InstanceState(nil), w.history...), w.failures
}

// Unsteady describes the instances of history that were ever seen other
// than passing, or changed at all (a check that flapped and came back
// moves its ModifyIndex), one line each with every state it was seen in;
// "" when each instance was seen in one passing state throughout.
func Unsteady(history []InstanceState) string {
	byID := map[string][]InstanceState{}
	for _, s := range history {
		byID[s.ServiceID] = append(byID[s.ServiceID], s)
	}
	var lines []string
	for id, states := range byID {
		if len(states) == 1 && states[0].Status == api.HealthPassing {
			continue
		}
		parts := make([]string, len(states))
		for i, s := range states {
			parts[i] = s.String()
		}
		lines = append(lines, id+": "+strings.Join(parts, "; "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
