package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// mock is a running mock engine.
type mock struct {
	*proc
	*harness.Mock
}

// startMock starts e's mock with o, serving o.Model (default e's model)
// with a fresh instance id, on o.GRPC or a fresh port.
func startMock(t *testing.T, e *engine, o harness.MockOpts) *mock {
	t.Helper()
	if o.Model == "" {
		o.Model = e.model
	}
	if o.InstanceID == "" {
		o.InstanceID = e.NewInstanceID()
	}
	hm, err := harness.StartMock(starter{t}, e.Engine, e.mockBin, o)
	if err != nil {
		t.Fatal(err)
	}
	return &mock{proc: &proc{Proc: hm.Proc, t: t}, Mock: hm}
}

// delay is a harness.MockOpts.TokenDelay.
func delay(d time.Duration) *time.Duration { return &d }

// post sends a control request and fails the test unless it succeeds.
func (m *mock) post(t *testing.T, path string, body any) {
	t.Helper()
	if err := m.Post(path, body); err != nil {
		t.Fatal(err)
	}
}

func (m *mock) setHealth(t *testing.T, service, status string) {
	t.Helper()
	if err := m.SetServiceHealth(service, status); err != nil {
		t.Fatal(err)
	}
}

func (m *mock) state(t *testing.T) harness.MockState {
	t.Helper()
	st, err := m.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lastHealthChange is when the mock last changed a health status.
func (m *mock) lastHealthChange(t *testing.T) time.Time {
	return time.Unix(0, m.state(t).LastHealthChangeUnixNano)
}

// vigilOpts are the flags of one vigil run.
type vigilOpts struct {
	engine     *engine // required
	engineAddr string
	discovery  string // "consul" (default) or "file"
	consul     *consulAgent
	service    string
	registry   string // file registry directory
	listen     string // a fresh loopback port when empty
	workerID   string // worker-PORT when empty
	defaultID  bool   // leave --worker-id out: vigil's default
	extra      []string
	env        []string // added to vigil's environment
}

type vigil struct {
	*proc
	*harness.Vigil
}

func startVigil(t *testing.T, o vigilOpts) *vigil {
	t.Helper()
	if o.engine == nil {
		t.Fatal("vigilOpts: no engine")
	}
	listen := o.listen
	if listen == "" {
		listen = addr(freePort(t))
	}
	workerID := o.workerID
	if workerID == "" && !o.defaultID {
		workerID = "worker-" + filepath.Base(listen)
	}
	ho := harness.VigilOpts{Engine: o.engine.Name, EngineAddr: o.engineAddr, RegistryDir: o.registry, Service: o.service,
		Listen: listen, WorkerID: workerID, DefaultWorkerID: o.defaultID,
		// GORACE (process_test.go sets it) reaches the adapter too: a
		// race-built adapter would otherwise sleep 1s at exit. The suite's
		// engines report a failure by NOT_SERVING with their process up
		// (engine.unhealthy), which vLLM's adapter takes for a drain on
		// purpose: --drain-timeout 0 keeps it a loss; TestEngineDrains
		// turns the drain on.
		Extra: append([]string{"--check-ttl", "5s", "--grace-period", "5s", "--drain-timeout", "0", "--plugin-env", "GORACE"}, o.extra...), Env: o.env}
	if o.discovery != "file" {
		if o.consul == nil {
			t.Fatal("vigilOpts: consul discovery without an agent")
		}
		ho.Consul = o.consul.Consul
	}
	hv, err := harness.StartVigil(starter{t}, vigilBin, ho)
	if err != nil {
		t.Fatal(err)
	}
	return &vigil{proc: &proc{Proc: hv.Proc, t: t}, Vigil: hv}
}

func (v *vigil) term(t *testing.T) { v.signal(syscall.SIGTERM) }

// fileRecord is the file registry's record format, as a reader sees it.
type fileRecord struct {
	ID         string            `json:"id"`
	Service    string            `json:"service"`
	Address    string            `json:"address"`
	Port       int               `json:"port"`
	Engine     string            `json:"engine"`
	Model      string            `json:"model"`
	InstanceID string            `json:"instance_id"`
	Meta       map[string]string `json:"meta"`
	Owner      string            `json:"owner"`
	Heartbeat  time.Time         `json:"heartbeat"`
	Expires    time.Time         `json:"expires"`
}

// waitFile polls the record path until present is as wanted; a file has no
// event to await without a watcher dependency, so a short poll stands in.
func waitFile(t *testing.T, path string, present bool, timeout time.Duration) (fileRecord, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(path)
		now := time.Now()
		if present && err == nil {
			var rec fileRecord
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatalf("record %s: %v", path, err)
			}
			return rec, now
		}
		if !present && os.IsNotExist(err) {
			return fileRecord{}, now
		}
		if now.After(deadline) {
			t.Fatalf("record %s present=%v not reached within %s", path, present, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
