package router

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

// watch runs src until the test ends and returns its snapshots.
func watch(t *testing.T, src Source) <-chan []Endpoint {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	snaps := make(chan []Endpoint, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Run(ctx, func(eps []Endpoint) {
			select {
			case snaps <- append([]Endpoint(nil), eps...):
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return snaps
}

// next returns the next snapshot, failing the test if none comes within
// a generous bound.
func next(t *testing.T, snaps <-chan []Endpoint) []Endpoint {
	t.Helper()
	select {
	case eps := <-snaps:
		return eps
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot within 10s")
		return nil
	}
}

func TestFileSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := file.New(dir, time.Minute)
	w := discovery.Registration{
		Service: "llm", WorkerID: "w1", Address: "127.0.0.1", Port: 8470,
		Engine: "vllm", Model: "m", ModelID: "org/m", InstanceID: "i1",
	}
	other := w
	other.Service, other.WorkerID = "other", "w2"
	if err := reg.Register(t.Context(), other); err != nil {
		t.Fatal(err)
	}

	snaps := watch(t, NewFileSource(dir, "llm", nil))
	if eps := next(t, snaps); len(eps) != 0 {
		t.Errorf("first snapshot = %v, want empty (no worker of service llm yet)", eps)
	}

	if err := reg.Register(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{ID: "w1", Addr: "127.0.0.1:8470", Model: "m", Engine: "vllm", InstanceID: "i1"}}
	if diff := cmp.Diff(want, next(t, snaps)); diff != "" {
		t.Errorf("after Register (-want +got):\n%s", diff)
	}

	// A heartbeat rewrites the record but changes no endpoint: no
	// snapshot. The deregistration is the next one.
	if err := reg.Heartbeat(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if err := reg.Deregister(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if eps := next(t, snaps); len(eps) != 0 {
		t.Errorf("after Deregister: %v, want empty", eps)
	}
}

// fakeHealth is a ConsulHealth that answers queries from a script and then
// blocks until the query's context ends.
type fakeHealth struct {
	mu      sync.Mutex
	answers []consulAnswer
	indexes []uint64 // WaitIndex of each query
	// blocked is closed when the script has run out and a query blocks.
	blocked     chan struct{}
	blockedOnce sync.Once
}

type consulAnswer struct {
	entries []*api.ServiceEntry
	index   uint64
	err     error
}

func (h *fakeHealth) Service(service, tag string, passingOnly bool, q *api.QueryOptions) ([]*api.ServiceEntry, *api.QueryMeta, error) {
	h.mu.Lock()
	h.indexes = append(h.indexes, q.WaitIndex)
	if service != "llm" || tag != "" || !passingOnly {
		h.mu.Unlock()
		return nil, nil, errors.New("unexpected query")
	}
	if len(h.answers) == 0 {
		h.mu.Unlock()
		h.blockedOnce.Do(func() { close(h.blocked) })
		<-q.Context().Done()
		return nil, nil, q.Context().Err()
	}
	a := h.answers[0]
	h.answers = h.answers[1:]
	h.mu.Unlock()
	return a.entries, &api.QueryMeta{LastIndex: a.index}, a.err
}

func (h *fakeHealth) waitIndexes() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.indexes...)
}

func entry(id, addr, nodeAddr string, port int, model string) *api.ServiceEntry {
	return &api.ServiceEntry{
		Node: &api.Node{Address: nodeAddr},
		Service: &api.AgentService{
			ID: "llm-" + id, Service: "llm", Address: addr, Port: port, Tags: []string{"vllm"},
			Meta: map[string]string{"engine": "vllm", "model": model, "model_id": "org/" + model, "instance_id": id + "-i", "worker_id": id},
		},
	}
}

func TestConsulSource(t *testing.T) {
	t.Parallel()
	h := &fakeHealth{blocked: make(chan struct{}), answers: []consulAnswer{
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m"), entry("w1", "", "10.0.0.1", 8470, "m")}, index: 5},
		// Same set at a later index (another service changed): no snapshot.
		{entries: []*api.ServiceEntry{entry("w1", "", "10.0.0.1", 8470, "m"), entry("w2", "10.0.0.2", "", 8470, "m")}, index: 6},
		// The index went backwards (a restarted server): the next query
		// starts over from 0.
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m")}, index: 2},
		// A failure keeps the last set (no snapshot), and the next query
		// starts over too.
		{err: errors.New("agent unreachable")},
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m")}, index: 8},
	}}
	snaps := watch(t, NewConsulSource(h, "llm", nil))

	want := []Endpoint{
		{ID: "w1", Addr: "10.0.0.1:8470", Model: "m", Engine: "vllm", InstanceID: "w1-i"},
		{ID: "w2", Addr: "10.0.0.2:8470", Model: "m", Engine: "vllm", InstanceID: "w2-i"},
	}
	if diff := cmp.Diff(want, next(t, snaps)); diff != "" {
		t.Errorf("first snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], next(t, snaps)); diff != "" {
		t.Errorf("second snapshot (-want +got):\n%s", diff)
	}
	<-h.blocked
	if diff := cmp.Diff([]uint64{0, 5, 6, 0, 0, 8}, h.waitIndexes()); diff != "" {
		t.Errorf("wait indexes (-want +got):\n%s", diff)
	}
	select {
	case eps := <-snaps:
		t.Errorf("unexpected snapshot %v: the set did not change", eps)
	default:
	}
}

func TestFromEntriesSkipsUnusable(t *testing.T) {
	t.Parallel()
	noPort := entry("w3", "10.0.0.3", "", 0, "m")
	noMeta := entry("w4", "10.0.0.4", "", 8470, "")
	noMeta.Service.Meta = nil
	got := fromEntries([]*api.ServiceEntry{nil, {Node: &api.Node{}}, noPort, noMeta, entry("w5", "", "", 8470, "m")})
	want := []Endpoint{{ID: "llm-w4", Addr: "10.0.0.4:8470", Engine: "vllm"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}
