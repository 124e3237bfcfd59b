package consul

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/discoverytest"
)

// fakeHealth is a Health that answers queries from a script and then
// blocks until the query's context ends.
type fakeHealth struct {
	mu      sync.Mutex
	answers []consulAnswer
	indexes []uint64 // WaitIndex of each query
	stale   []bool   // AllowStale of each query
	tokens  []string // Token of each query
	// blocked is closed when the script has run out and a query blocks.
	blocked     chan struct{}
	blockedOnce sync.Once
}

type consulAnswer struct {
	entries []*api.ServiceEntry
	index   uint64
	err     error
	// noLeader: the answering server knew no leader (a stale read).
	noLeader bool
	// filtered: ACLs hid some results from the token.
	filtered bool
}

func (h *fakeHealth) Query(endpoint string, out any, q *api.QueryOptions) (*api.QueryMeta, error) {
	h.mu.Lock()
	h.indexes = append(h.indexes, q.WaitIndex)
	h.stale = append(h.stale, q.AllowStale)
	h.tokens = append(h.tokens, q.Token)
	if endpoint != "/v1/health/service/llm" {
		h.mu.Unlock()
		return nil, errors.New("unexpected query")
	}
	if len(h.answers) == 0 {
		h.mu.Unlock()
		h.blockedOnce.Do(func() { close(h.blocked) })
		<-q.Context().Done()
		return nil, q.Context().Err()
	}
	a := h.answers[0]
	h.answers = h.answers[1:]
	h.mu.Unlock()
	if a.err != nil {
		return nil, a.err
	}
	if err := reencode(a.entries, out); err != nil {
		return nil, err
	}
	return &api.QueryMeta{LastIndex: a.index, KnownLeader: !a.noLeader, ResultsFilteredByACLs: a.filtered}, nil
}

// reencode decodes in into out through JSON, as the Consul client does.
func reencode(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (h *fakeHealth) waitIndexes() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.indexes...)
}

// entry is a health entry as Register writes it, with the service's
// address (or, when addr is empty, the node's).
func entry(id, addr, nodeAddr string, port int, model string) *api.ServiceEntry {
	return &api.ServiceEntry{
		Node: &api.Node{Address: nodeAddr},
		Service: &api.AgentService{
			ID: "llm-" + id, Service: "llm", Address: addr, Port: port, Tags: []string{"vllm"},
			Meta: discovery.Registration{Engine: "vllm", Model: model, ModelID: "org/" + model, InstanceID: id + "-i", WorkerID: id}.Meta(),
		},
	}
}

// worker is the registration entry(id, ...) stands for.
func worker(id, addr string) discovery.Registration {
	return discovery.Registration{Service: "llm", WorkerID: id, Address: addr, Port: 8470,
		Engine: "vllm", Model: "m", ModelID: "org/m", InstanceID: id + "-i"}
}

func TestDiscoverer(t *testing.T) {
	t.Parallel()
	h := &fakeHealth{blocked: make(chan struct{}), answers: []consulAnswer{
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m"), entry("w1", "", "10.0.0.1", 8470, "m")}, index: 5},
		// Same set at a later index (another service changed): no set.
		{entries: []*api.ServiceEntry{entry("w1", "", "10.0.0.1", 8470, "m"), entry("w2", "10.0.0.2", "", 8470, "m")}, index: 6},
		// The index went backwards (a restarted server): the next query
		// starts over from 0.
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m")}, index: 2},
		// A failure keeps the last set (no set), and the next query
		// starts over too.
		{err: errors.New("agent unreachable")},
		{entries: []*api.ServiceEntry{entry("w2", "10.0.0.2", "", 8470, "m")}, index: 8},
	}}
	sets := discoverytest.Watch(t, NewDiscoverer(h, "llm", nil))

	want := []discovery.Registration{worker("w1", "10.0.0.1"), worker("w2", "10.0.0.2")}
	if diff := cmp.Diff(want, discoverytest.Next(t, sets)); diff != "" {
		t.Errorf("first set (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], discoverytest.Next(t, sets)); diff != "" {
		t.Errorf("second set (-want +got):\n%s", diff)
	}
	<-h.blocked
	if diff := cmp.Diff([]uint64{0, 5, 6, 0, 0, 8}, h.waitIndexes()); diff != "" {
		t.Errorf("wait indexes (-want +got):\n%s", diff)
	}
	select {
	case rs := <-sets:
		t.Errorf("unexpected set %v: the set did not change", rs)
	default:
	}
}

// TestDiscovererStaleReads: every query allows stale reads, so a cluster
// without a leader (a lost quorum) still answers, and its answers are sets
// like any other.
func TestDiscovererStaleReads(t *testing.T) {
	t.Parallel()
	w1 := entry("w1", "10.0.0.1", "", 8470, "m")
	w2 := entry("w2", "10.0.0.2", "", 8470, "m")
	h := &fakeHealth{blocked: make(chan struct{}), answers: []consulAnswer{
		{entries: []*api.ServiceEntry{w1}, index: 5},
		{entries: []*api.ServiceEntry{w1, w2}, index: 6, noLeader: true},
		{entries: []*api.ServiceEntry{w2}, index: 7, noLeader: true},
	}}
	sets := discoverytest.Watch(t, NewDiscoverer(h, "llm", nil))
	for i, want := range [][]discovery.Registration{
		{worker("w1", "10.0.0.1")},
		{worker("w1", "10.0.0.1"), worker("w2", "10.0.0.2")},
		{worker("w2", "10.0.0.2")},
	} {
		if diff := cmp.Diff(want, discoverytest.Next(t, sets)); diff != "" {
			t.Errorf("set %d (-want +got):\n%s", i, diff)
		}
	}
	<-h.blocked
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, stale := range h.stale {
		if !stale {
			t.Errorf("query %d does not allow stale reads", i)
		}
	}
}

// TestFromEntries: registrations come from passing entries' meta; an
// entry whose meta no current vigil wrote (registered by hand, or by a
// vigil before v0.1.0) is left out and handed to skip by its service id.
func TestFromEntries(t *testing.T) {
	t.Parallel()
	noMeta := entry("w4", "10.0.0.4", "", 8470, "")
	noMeta.Service.Meta = nil
	noPrompts := entry("w5", "10.0.0.5", "", 8470, "m")
	delete(noPrompts.Service.Meta, discovery.MetaPrompts)
	testCases := map[string]struct {
		entries []*api.ServiceEntry
		want    []discovery.Registration
		skipped []string
	}{
		"nil":        {nil, []discovery.Registration{}, nil},
		"nil entry":  {[]*api.ServiceEntry{nil}, []discovery.Registration{}, nil},
		"no service": {[]*api.ServiceEntry{{Node: &api.Node{}}}, []discovery.Registration{}, nil},
		"service address": {[]*api.ServiceEntry{entry("w1", "10.0.0.1", "10.9.9.9", 8470, "m")},
			[]discovery.Registration{worker("w1", "10.0.0.1")}, nil},
		"node address": {[]*api.ServiceEntry{entry("w1", "", "10.0.0.1", 8470, "m")},
			[]discovery.Registration{worker("w1", "10.0.0.1")}, nil},
		"no meta, no prompts: left out": {[]*api.ServiceEntry{noMeta, entry("w1", "10.0.0.1", "", 8470, "m"), noPrompts},
			[]discovery.Registration{worker("w1", "10.0.0.1")},
			[]string{"llm-w4: metadata lacks engine, model, model_id, instance_id, worker_id, prompts, max_model_len, owner, which every current vigil publishes",
				"llm-w5: metadata lacks prompts, which every current vigil publishes"}},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var entries []*healthEntry
			if err := reencode(tc.entries, &entries); err != nil {
				t.Fatal(err)
			}
			var skipped []string
			got := fromEntries(entries, func(id string, err error) { skipped = append(skipped, id+": "+err.Error()) })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("registrations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDiscovererACLs: a query refused for want of a permission (a 403) is
// logged at ERROR in Consul's words, as discovery.ErrPermissionDenied; an
// answer that ACLs filtered is said once, at WARN, however many follow.
func TestDiscovererACLs(t *testing.T) {
	t.Parallel()
	h := &fakeHealth{blocked: make(chan struct{}), answers: []consulAnswer{
		{err: api.StatusError{Code: 403, Body: "ACL not found"}},
		{index: 5, filtered: true},
		{index: 6, filtered: true, entries: []*api.ServiceEntry{entry("w1", "10.0.0.1", "", 8470, "m")}},
	}}
	var buf strings.Builder
	var mu sync.Mutex
	log := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})})
	sets := discoverytest.Watch(t, NewDiscoverer(h, "llm", log))
	discoverytest.Next(t, sets)
	discoverytest.Next(t, sets)
	<-h.blocked
	mu.Lock()
	got := buf.String()
	mu.Unlock()
	if !strings.Contains(got, "[ERROR]") || !strings.Contains(got, "permission denied: Unexpected response code: 403 (ACL not found)") {
		t.Errorf("log %q, want an ERROR with Consul's refusal", got)
	}
	if n := strings.Count(got, "ACLs hid"); n != 1 || !strings.Contains(got, "[WARN]") || !strings.Contains(got, "service:read") {
		t.Errorf("log %q, want one WARN that ACLs hid workers, naming service:read", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// shardFake answers each filter's queries from its own channel.
type shardFake map[string]chan []*api.ServiceEntry

func (f shardFake) Query(endpoint string, out any, q *api.QueryOptions) (*api.QueryMeta, error) {
	select {
	case entries := <-f[q.Filter]:
		return &api.QueryMeta{LastIndex: q.WaitIndex + 1}, reencode(entries, out)
	case <-q.Context().Done():
		return nil, q.Context().Err()
	}
}

// Sharded reports the union of its shards' answers, only once every shard
// has answered (a partial set would make the router call a model unknown),
// then at each change within one shard; a shard whose answer is unchanged
// (another shard changed) reports nothing. Entries with a check not passing
// are left out.
func TestShardedDiscoverer(t *testing.T) {
	t.Parallel()
	f := shardFake{}
	for _, filter := range ownerShards {
		f[filter] = make(chan []*api.ServiceEntry, 4)
	}
	sets := discoverytest.Watch(t, NewDiscoverer(f, "llm", nil).Sharded())
	w1, w2, w3 := entry("w1", "10.0.0.1", "", 8470, "m"), entry("w2", "10.0.0.2", "", 8470, "m"), entry("w3", "10.0.0.3", "", 8470, "m")
	critical := entry("w4", "10.0.0.4", "", 8470, "m")
	critical.Checks = api.HealthChecks{{Status: api.HealthPassing}, {Status: api.HealthCritical}}
	f[ownerShards[0]] <- []*api.ServiceEntry{w1}
	for _, filter := range ownerShards[1 : len(ownerShards)-1] {
		f[filter] <- nil
	}
	select {
	case set := <-sets:
		t.Fatalf("a set before every shard answered: %v", set)
	case <-time.After(50 * time.Millisecond):
	}
	f[ownerShards[len(ownerShards)-1]] <- []*api.ServiceEntry{w2, critical}
	want := []discovery.Registration{worker("w1", "10.0.0.1"), worker("w2", "10.0.0.2")}
	if diff := cmp.Diff(want, discoverytest.Next(t, sets)); diff != "" {
		t.Fatalf("first set (-want +got):\n%s", diff)
	}
	f[ownerShards[0]] <- []*api.ServiceEntry{w1} // unchanged: no set
	f[ownerShards[2]] <- []*api.ServiceEntry{w3} // w3 joins
	want = []discovery.Registration{worker("w1", "10.0.0.1"), worker("w2", "10.0.0.2"), worker("w3", "10.0.0.3")}
	if diff := cmp.Diff(want, discoverytest.Next(t, sets)); diff != "" {
		t.Fatalf("after w3 joined (-want +got):\n%s", diff)
	}
	f[ownerShards[len(ownerShards)-1]] <- []*api.ServiceEntry{critical} // w2 leaves
	want = []discovery.Registration{worker("w1", "10.0.0.1"), worker("w3", "10.0.0.3")}
	if diff := cmp.Diff(want, discoverytest.Next(t, sets)); diff != "" {
		t.Fatalf("after w2 left (-want +got):\n%s", diff)
	}
}

// A router's token rotated in CONSUL_HTTP_TOKEN_FILE is sent from the
// query after the one Consul refused.
func TestDiscovererTokenFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fakeHealth{blocked: make(chan struct{}), answers: []consulAnswer{
		{err: api.StatusError{Code: 403, Body: "Permission denied"}},
		{entries: []*api.ServiceEntry{entry("w1", "10.0.0.1", "", 8470, "m")}, index: 5},
	}}
	d := NewDiscoverer(h, "llm", nil).WithTokenFile(path)
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sets := discoverytest.Watch(t, d)
	if rs := discoverytest.Next(t, sets); len(rs) != 1 {
		t.Fatalf("set %v, want w1", rs)
	}
	<-h.blocked
	h.mu.Lock()
	defer h.mu.Unlock()
	if diff := cmp.Diff([]string{"old", "new", "new"}, h.tokens); diff != "" {
		t.Errorf("tokens sent (-want +got):\n%s", diff)
	}
}
